/** Which isolation levels an engine gives: `gvisor` when a runsc runtime is registered with it. */
import { ContainerError, type Isolation } from '@berth/core'
import type Docker from 'dockerode'
import type { EngineContext } from './context.js'

/**
 * The engine's isolation levels, read from its `/info` `Runtimes` (Docker's daemon.json
 * `runtimes`, Podman's containers.conf `[engine.runtimes]`). A found gVisor is remembered;
 * a missing one is asked again next time, so registering runsc needs no Berth restart.
 * With `gvisorClient` (Podman's second API service) that one is asked, and its silence
 * means no gVisor.
 *
 * @example
 * ```ts
 * const isolations = engineIsolations(ctx)
 * await isolations() // ['container', 'gvisor']
 * ```
 */
export function engineIsolations(
  ctx: EngineContext,
  runtime = 'runsc',
  gvisorClient?: Docker,
): () => Promise<readonly Isolation[]> {
  let found = false
  return async () => {
    if (!found) {
      const info = (await (gvisorClient ?? ctx.docker).info().catch((err: unknown) => {
        if (gvisorClient) return {}
        throw ctx.error(err, 'info')
      })) as { Runtimes?: Record<string, unknown> | null }
      found = Object.hasOwn(info.Runtimes ?? {}, runtime)
    }
    return found ? ['container', 'gvisor'] : ['container']
  }
}

/**
 * `unsupported` when the engine cannot give `isolation` (no runsc registered with it).
 *
 * @example
 * ```ts
 * await assertIsolation(ctx, 'gvisor', isolations) // throws when runsc is missing
 * ```
 */
export async function assertIsolation(
  ctx: EngineContext,
  isolation: Isolation,
  isolations: () => Promise<readonly Isolation[]>,
): Promise<void> {
  if ((await isolations()).includes(isolation)) return
  throw new ContainerError(
    'unsupported',
    `The ${ctx.name} engine cannot give ${isolation} isolation (no runsc runtime registered); run scripts/gvisor/ensure.sh`,
    { runtime: ctx.name },
  )
}
