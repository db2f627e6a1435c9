import { forkTs } from './child.js'
import type { LoadConfig, LoadResult } from './loadgen.js'

export type { LoadConfig, LoadResult } from './loadgen.js'

/** Called when the load generator's measured window starts and ends. */
export interface WindowHooks {
  onMeasureStart?(): void
  onMeasureEnd?(): void
}

/**
 * Run `cfg` from a separate Node process (bench/lib/loadgen.ts). Bounded: the child is
 * killed if it has not answered within warm-up + duration + 20 s.
 *
 * @example
 * ```ts
 * const r = await runLoad({ host: '127.0.0.1', port, method: 'GET', path: '/', headers: {},
 *   connections: 32, warmupMs: 2000, durationMs: 5000, expectStatus: 200 })
 * console.log(r.rps, r.latencyMs.p99)
 * ```
 */
export async function runLoad(cfg: LoadConfig, hooks: WindowHooks = {}): Promise<LoadResult> {
  const child = forkTs('loadgen.ts')
  try {
    child.process.on('message', (m: { type: string }) => {
      if (m.type === 'measure-start') hooks.onMeasureStart?.()
      else if (m.type === 'measure-end') hooks.onMeasureEnd?.()
    })
    child.send(cfg)
    const { result } = await child.next<{ result: LoadResult }>('result', cfg.warmupMs + cfg.durationMs + 20_000)
    return result
  } finally {
    child.kill()
  }
}
