/**
 * Metrics overhead on the HTTP path: authenticated `GET /v1/profiles/:id` through Berth with
 * Prometheus metrics off (the embedded default) and on (`createBerth({ metrics: true })`, as
 * the standalone server runs), each in its own process, same load, rounds alternating the two.
 * Reports requests per second and server CPU per request for each, and the ratio on / off.
 *
 *   node --import tsx bench/metrics.ts     # alone (packages must be built)
 *
 * Knobs (environment): BENCH_CONNECTIONS (32), BENCH_WARMUP_MS (2000), BENCH_DURATION_MS
 * (5000), BENCH_ROUNDS (3).
 */
import { fileURLToPath } from 'node:url'
import { startHost, type Host } from './lib/hosts.js'
import { runLoad } from './lib/load.js'
import { int, ms, table } from './lib/table.js'

interface Row {
  metrics: boolean
  rps: number[]
  cpuUs: number[]
}

const num = (name: string, dflt: number): number => {
  const raw = process.env[name]
  const n = raw === undefined || raw === '' ? dflt : Number(raw)
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${raw}`)
  return n
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

async function measure(host: Host, o: { connections: number; warmupMs: number; durationMs: number }) {
  const result = await runLoad(
    {
      host: '127.0.0.1',
      port: host.port,
      method: 'GET',
      path: host.path,
      headers: host.headers,
      connections: o.connections,
      warmupMs: o.warmupMs,
      durationMs: o.durationMs,
      expectStatus: 200,
      expectBodyBytes: host.body.length,
    },
    { onMeasureStart: () => host.measureStart() },
  )
  const cores = await host.measureEnd()
  return { rps: result.rps, cpuUs: result.requests ? (cores * result.durationMs * 1000) / result.requests : NaN }
}

/**
 * Run the metrics overhead benchmark and print its table.
 *
 * @example
 * ```ts
 * const { ratio } = await main()
 * ```
 */
export async function main(): Promise<{ ratio: number; cpuRatio: number }> {
  const o = {
    connections: num('BENCH_CONNECTIONS', 32),
    warmupMs: num('BENCH_WARMUP_MS', 2_000),
    durationMs: num('BENCH_DURATION_MS', 5_000),
  }
  const rounds = num('BENCH_ROUNDS', 3)
  console.log(
    '\nHTTP with Prometheus metrics: authenticated GET /v1/profiles/:id, Berth (memory store) metrics off vs on',
  )
  console.log(
    `  ${o.connections} keep-alive connections, ${o.warmupMs} ms warm-up, ${o.durationMs} ms measured, ${rounds} rounds alternating (medians)`,
  )
  const rows: Row[] = [
    { metrics: false, rps: [], cpuUs: [] },
    { metrics: true, rps: [], cpuUs: [] },
  ]
  const hosts: Host[] = []
  try {
    for (const row of rows) hosts.push(await startHost({ kind: 'memory', metrics: row.metrics }))
    for (let round = 0; round < rounds; round++) {
      // Alternate which goes first, so neither always meets a warmer or busier machine.
      const order = round % 2 ? [1, 0] : [0, 1]
      for (const i of order) {
        const m = await measure(hosts[i]!, o)
        rows[i]!.rps.push(m.rps)
        rows[i]!.cpuUs.push(m.cpuUs)
      }
    }
  } finally {
    await Promise.all(hosts.map((h) => h.close().catch(() => undefined)))
  }
  const [off, on] = rows.map((r) => ({ rps: median(r.rps), cpuUs: median(r.cpuUs) })) as [
    { rps: number; cpuUs: number },
    { rps: number; cpuUs: number },
  ]
  const ratio = on.rps / off.rps
  const cpuRatio = off.cpuUs / on.cpuUs
  console.log(
    table(
      ['metrics', 'req/s (median)', 'server CPU µs/req', 'ratio on/off'],
      [
        ['off', int(off.rps), ms(off.cpuUs), '1.00'],
        ['on', int(on.rps), ms(on.cpuUs), ratio.toFixed(2)],
      ],
    ),
  )
  console.log(`  CPU efficiency on/off (off µs/req over on µs/req): ${cpuRatio.toFixed(2)}`)
  return { ratio, cpuRatio }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main()
