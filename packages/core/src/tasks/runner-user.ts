/** Who the runner runs as in a container. */
import type { ContainerRuntime } from '../ports/container-runtime.js'

/**
 * Who the runner runs as: root where the engine honours users, so the runner can start the
 * agent as the container's own user and the agent cannot reach the runner's output, memory
 * or environment (`runner/src/agent-user.ts`); the runtime's default elsewhere.
 *
 * @example
 * ```ts
 * runtime.exec(id, { cmd, ...runnerUser(runtime) })
 * ```
 */
export function runnerUser(runtime: Pick<ContainerRuntime, 'capabilities'>): { user?: string } {
  return runtime.capabilities?.unprivilegedUser ? { user: '0' } : {}
}
