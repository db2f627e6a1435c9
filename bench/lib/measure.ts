import type { Host } from './hosts.js'
import { runLoad, type LoadResult } from './load.js'
import { busyCores, machineCpu } from './machine.js'

/** One measured window. */
export interface Measurement extends LoadResult {
  /** CPU of the server's process during the window, in cores (1 = one core busy). */
  serverCpuCores: number
  /** Server CPU time per request, in microseconds: less sensitive to a busy machine than req/s. */
  serverCpuUsPerRequest: number
  /** CPU used by everything else on the machine during the window, in cores (Linux only). */
  otherCpuCores: number
}

/** What one window of load needs: connections, warm-up and window length. */
export interface WindowOptions {
  connections: number
  warmupMs: number
  durationMs: number
}

/**
 * The median of the finite numbers of `xs` (NaN when there is none).
 *
 * @example
 * ```ts
 * median([3, 1, 2]) // 2
 * ```
 */
export const median = (xs: number[]): number => {
  const s = [...xs].filter(Number.isFinite).sort((a, b) => a - b)
  if (s.length === 0) return NaN
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/**
 * Load `host` from a separate process for one window: req/s, latency, and the server's CPU.
 *
 * @example
 * ```ts
 * const m = await measure(host, { connections: 32, warmupMs: 2000, durationMs: 5000 })
 * m.serverCpuUsPerRequest
 * ```
 */
export async function measure(host: Host, opts: WindowOptions): Promise<Measurement> {
  let m0: ReturnType<typeof machineCpu> = null
  let m1: ReturnType<typeof machineCpu> = null
  const result = await runLoad(
    {
      host: '127.0.0.1',
      port: host.port,
      method: 'GET',
      path: host.path,
      headers: host.headers,
      connections: opts.connections,
      warmupMs: opts.warmupMs,
      durationMs: opts.durationMs,
      expectStatus: 200,
      expectBodyBytes: host.body.length,
    },
    {
      onMeasureStart: () => {
        m0 = machineCpu()
        host.measureStart()
      },
      onMeasureEnd: () => {
        m1 = machineCpu()
      },
    },
  )
  const serverCpuCores = await host.measureEnd()
  const other = busyCores(m0, m1) - serverCpuCores - result.generatorCpuCores
  return {
    ...result,
    serverCpuCores,
    serverCpuUsPerRequest: result.requests ? (serverCpuCores * result.durationMs * 1000) / result.requests : NaN,
    // Small negative values are sampling skew between the three clocks.
    otherCpuCores: Number.isFinite(other) ? Math.max(0, other) : NaN,
  }
}
