/** Which isolation levels a container runtime gives (environments asking for more are refused). */
import type { Isolation } from '@berth/contract'
import type { ContainerRuntime } from '../ports/container-runtime.js'

/**
 * The runtime's name and a probe of the isolation levels it gives now: its own answer, or
 * `container` alone for a runtime that does not say (the `local` runtime).
 *
 * @example
 * ```ts
 * await isolationLevels(dockerRuntime()).levels() // ['container', 'gvisor'] once runsc is registered
 * ```
 */
export function isolationLevels(runtime: ContainerRuntime): {
  runtime: string
  levels: () => Promise<readonly Isolation[]>
} {
  return {
    runtime: runtime.name,
    levels: async () => (runtime.isolations ? runtime.isolations() : ['container']),
  }
}
