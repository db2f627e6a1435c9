/** What a chosen runtime needs to run tasks: the image and its recipe, the runner, the pool. */
import { hostImageRecipe } from '@berth/adapter-docker'
import { defaultPoolName } from '@berth/core'
import { sharedRunnerBundle } from '@berth/runner'
import type { BerthOptions } from '../berth-options.js'
import { configFromEnv } from '../config.js'
import type { ChosenRuntime } from './runtime-choice.js'

/** The image task containers start from when none is named (`BERTH_IMAGE`). */
export const DEFAULT_IMAGE = 'berth-runner:latest'

/** Settings of {@link containerDefaults}, as the SETTINGS table names them. */
export interface ContainerSettings {
  dataDir: string
  /** `BERTH_IMAGE` (default {@link DEFAULT_IMAGE}; nothing on `local`). */
  image?: string | undefined
  /** `BERTH_RUNNER`: `bundle` mounts a runner built from this install, `image` uses the image's own. */
  runner?: 'bundle' | 'image'
  poolMin?: number
  poolMax?: number
  poolName?: string | undefined
  warmAgents?: number
  /** `BERTH_WARM_IDLE_S`: a parked agent no task took for this long is reclaimed. */
  warmIdleS?: number
  /** Told when images cannot be built from this host (a missing image must then be pulled). */
  warn?: (message: string) => void
}

/**
 * The pool, runner and environment-image options that make `runtime` run tasks the way
 * `pnpm start` does: the warm path on (idle containers and warm agents sized by this host's
 * memory, as the SETTINGS table's defaults), by default the shared runner bundle of this install mounted read-only
 * (any image with Node 20 works; on `local`, this host's Node), and a missing image pulled
 * or else built from this host's Node (`hostImageRecipe`).
 *
 * @example
 * ```ts
 * const chosen = chooseRuntime({ dataDir })
 * createBerth({ runtime: chosen.runtime, ...containerDefaults(chosen, { dataDir, poolMin: 1 }) })
 * ```
 */
export function containerDefaults(
  chosen: Pick<ChosenRuntime, 'name'>,
  settings: ContainerSettings,
): Required<Pick<BerthOptions, 'pool' | 'runner' | 'environments'>> {
  const warn = settings.warn ?? console.warn
  // Unset: the SETTINGS table's defaults (the warm path on, sized by this host's memory).
  const defaults = configFromEnv({})
  // The local runtime runs host processes: an image means nothing there.
  const image = chosen.name === 'local' ? 'local' : (settings.image ?? DEFAULT_IMAGE)
  // BERTH_RUNNER=image uses the copy the production image carries (there is no image on `local`).
  const runner =
    settings.runner === 'image' && chosen.name !== 'local'
      ? { command: ['node', '/opt/berth-runner/main.js'] }
      : { bundleDir: sharedRunnerBundle().dir }
  // Bundle mode only: the image then needs nothing but Node, bash and the libraries.
  let imageRecipe: ReturnType<typeof hostImageRecipe> | undefined
  if (runner.bundleDir) {
    try {
      imageRecipe = hostImageRecipe()
    } catch (err) {
      warn(`berth: cannot build images from this host (${(err as Error).message}); a missing ${image} must be pulled`)
    }
  }
  return {
    pool: {
      image,
      // A local sandbox is quick to make, and its disk mounts would outlive a stopped server.
      min: settings.poolMin ?? (chosen.name === 'local' ? 0 : defaults.poolMin),
      max: settings.poolMax ?? defaults.poolMax,
      name: settings.poolName ?? defaultPoolName(settings.dataDir),
      warmAgents: settings.warmAgents ?? defaults.warmAgents,
      warmIdleMs: (settings.warmIdleS ?? defaults.warmIdleS) * 1000,
      ...(imageRecipe && { imageRecipe }),
    },
    runner,
    environments: imageRecipe ? { recipe: (packages) => hostImageRecipe({ packages }) } : {},
  }
}
