/** `createBerth`'s runtime option resolved: a runtime of the caller's, none, or one chosen by name with what it needs. */
import type { ContainerRuntime, Logger } from '@berth/core'
import type { BerthOptions, ResolvedBerthOptions } from '../berth-options.js'
import { configFromEnv } from '../config.js'
import { containerDefaults } from './container-defaults.js'
import { chooseRuntime } from './runtime-choice.js'

/**
 * The options with `runtime` resolved. A runtime named (or left to `auto`) is chosen here
 * and gets the pool, runner and environment-image defaults of `pnpm start`, under the
 * options the caller set; it is returned as `owned`, for `close()` to release.
 *
 * @example
 * ```ts
 * const { options: resolved, owned } = resolveRuntime({ dataDir }, dataDir, logger)
 * ```
 */
export function resolveRuntime(
  options: BerthOptions,
  dataDir: string,
  logger: Logger,
): { options: ResolvedBerthOptions; owned: ContainerRuntime | undefined } {
  const { runtime, ...rest } = options
  if (runtime === false) return { options: rest, owned: undefined }
  if (typeof runtime === 'object') return { options: { ...rest, runtime }, owned: undefined }
  const warn = (line: string) => logger.warn(line.trim())
  const chosen = chooseRuntime({ runtime, dataDir, warn })
  const made = containerDefaults(chosen, { dataDir, image: options.pool?.image, warn })
  logger.info('container runtime chosen', { runtime: chosen.description })
  // The fairness defaults of `pnpm start` (the SETTINGS table's, with no setting given).
  const { callerCaps, memoryBudgetMb } = configFromEnv({})
  return {
    options: {
      ...rest,
      runtime: chosen.runtime,
      callerCaps: options.callerCaps ?? callerCaps,
      pool: {
        ...made.pool,
        ...(memoryBudgetMb && { memoryBudgetBytes: memoryBudgetMb * 1024 * 1024 }),
        ...options.pool,
      },
      runner: options.runner ?? made.runner,
      environments: { ...made.environments, ...options.environments },
    },
    owned: chosen.runtime,
  }
}
