/** Where task containers come from and how the runner is started in them. */
import { ApiError } from '@berth/contract'
import type { ContainerRuntime } from '../ports/container-runtime.js'
import type { ContainerPool } from '../runtime/pool.js'
import type { WarmAgents } from './warm-agents.js'

/** Where task containers come from and how the runner is started in them. */
export interface TaskEngine {
  runtime: ContainerRuntime
  pool: ContainerPool
  /** The command that starts the runner inside a container, e.g. `['berth-runner']`. */
  command: string[]
  /** Agents started ahead of tasks (see {@link WarmAgents}); without it every task starts its runner cold. */
  warmAgents?: WarmAgents
}

/**
 * The engine, or CONTAINER_FAILED for a server without a container runtime.
 *
 * @example
 * ```ts
 * const { runtime, pool, command } = requireEngine(options.engine)
 * ```
 */
export function requireEngine(engine: TaskEngine | undefined): TaskEngine {
  if (!engine) throw new ApiError('CONTAINER_FAILED', 'This server has no container runtime configured, so it cannot run tasks')
  return engine
}
