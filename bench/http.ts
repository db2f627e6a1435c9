/**
 * HTTP benchmark: authenticated `GET /v1/profiles/:id` through Berth (h3 on node:http,
 * bearer auth, token-bucket limiter, valibot params, store read, JSON response) against a
 * bare node:http server answering the same bytes with the same content type, in the same
 * run, on 127.0.0.1.
 *
 * Three processes per measurement: this orchestrator, the server under test
 * (bench/lib/server-host.ts: Berth with unstorage's memory driver, Berth with its default store
 * in a temp dir, or bare node:http) and the load generator (bench/lib/loadgen.ts: fixed
 * keep-alive connections, warm-up, then a bounded window).
 *
 * Knobs (environment): BENCH_CONNECTIONS (32), BENCH_WARMUP_MS (2000),
 * BENCH_DURATION_MS (5000), BENCH_ROUNDS (1; more rounds alternate the targets and report
 * medians), BENCH_TARGETS (`bare,h3,memory,fs,standalone`), BENCH_SERVER_DIR (another built
 * @berth/server to measure), BENCH_SERVER_NODE_ARGS (extra node flags for the server
 * processes, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`), BENCH_TRACING (`1`: Berth's hosts
 * register an OpenTelemetry SDK exporting every span to a local OTLP sink; results go to
 * `http-tracing.json`, to compare with a run without it), BENCH_LAYERS (`0`: no per-layer table),
 * BENCH_STANDALONE_ENV (more settings for the standalone server), BENCH_PROFILE_DIR (keep its profile).
 *
 * The `standalone` row is examples/standalone-server started as `pnpm start` starts it, its request
 * log on stderr to a file (bench/lib/standalone-host.ts); after the rounds one more window of it
 * under `--cpu-prof` gives its CPU per request by layer (bench/lib/layers.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startHost, RATE_LIMIT, type Host, type HostKind } from './lib/hosts.js'
import { layerBreakdown, type LayerRow } from './lib/layers.js'
import { measure, median, type Measurement } from './lib/measure.js'
import { startStandalone } from './lib/standalone-host.js'
import { int, ms, table } from './lib/table.js'
import { startOtlpSink } from './lib/tracing.js'

/** Berth must serve at least this fraction of bare node:http's requests per second. */
export const TARGET_RATIO = 0.5
/** Berth (request log on) must serve at least this fraction of bare h3's requests per second, same adapter, same run (issue 15). */
export const TARGET_H3_RATIO = 0.8

const RESULTS_FILE = fileURLToPath(new URL('./results/http.json', import.meta.url))
const ALL_TARGETS: HostKind[] = ['bare', 'h3', 'memory', 'fs', 'standalone']
const isBerth = (kind: HostKind) => kind === 'memory' || kind === 'fs' || kind === 'standalone'

export type { Measurement } from './lib/measure.js'

export interface HttpBenchOptions {
  connections: number
  warmupMs: number
  durationMs: number
  rounds: number
  /** Which servers to measure: `bare`, `h3`, `memory`, `fs` (Berth in the host process), `standalone` (`pnpm start`). */
  targets: HostKind[]
  /** Extra node flags for the server processes. */
  serverNodeArgs: string[]
  /** After the rounds, profile the standalone server for the per-layer CPU table. */
  layers: boolean
  /** Where the JSON results go (null: not written). Only written when every target ran. */
  resultsFile: string | null
}

export interface TargetResult extends Measurement {
  target: string
  kind: HostKind
  storage: string
  /** Berth's req/s over bare node:http's in the same round (median over rounds); bare: 1. */
  ratio: number
  /** Bare's server CPU per request over this target's (median over rounds): efficiency, load-independent. */
  cpuRatio: number
  verdict: 'PASS' | 'BELOW TARGET' | 'baseline' | 'no baseline'
  /** Berth's req/s over bare h3's in the same round (median over rounds); NaN without the h3 target. */
  ratioH3: number
  /** Against {@link TARGET_H3_RATIO}. */
  verdictH3: 'PASS' | 'BELOW TARGET' | 'baseline' | 'no baseline'
  /** Every round's numbers; the fields above are the median round's (by req/s). */
  rounds: Measurement[]
  /** Berth: how far the rate limiter's bucket went down (it counted every request). */
  limiter?: { burst: number; remaining: number }
  /** The standalone server: bytes written to its request log file. */
  logBytes?: number
}

export interface HttpBenchReport {
  benchmark: 'http'
  request: string
  date: string
  node: string
  cpus: { count: number; model: string }
  config: Omit<HttpBenchOptions, 'resultsFile'> & {
    serverDir?: string
    rateLimit: typeof RATE_LIMIT
    bodyBytes: number
  }
  targetRatio: number
  results: TargetResult[]
  targetH3Ratio: number
  /** Every Berth target at or above {@link TARGET_H3_RATIO} of bare h3. */
  passH3: boolean
  /** Every Berth target at or above the target ratio. */
  pass: boolean
  /** The 1, 5 and 15 minute load averages when the report was written. */
  loadAverage: number[]
  /** The standalone server's CPU per request by layer (with `standalone` and `layers`). */
  layers?: LayerRow[]
}

function targetsFromEnv(raw: string | undefined): HostKind[] {
  if (!raw) return ALL_TARGETS
  const picked = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  const bad = picked.filter((p) => !ALL_TARGETS.includes(p as HostKind))
  if (bad.length || picked.length === 0)
    throw new Error(`BENCH_TARGETS takes a list of ${ALL_TARGETS.join(', ')}; got ${raw}`)
  return ALL_TARGETS.filter((t) => picked.includes(t))
}

function optionsFromEnv(): HttpBenchOptions {
  const num = (name: string, dflt: number) => {
    const raw = process.env[name]
    const n = raw === undefined || raw === '' ? dflt : Number(raw)
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${raw}`)
    return n
  }
  return {
    connections: num('BENCH_CONNECTIONS', 32),
    warmupMs: num('BENCH_WARMUP_MS', 2_000),
    durationMs: num('BENCH_DURATION_MS', 5_000),
    rounds: num('BENCH_ROUNDS', 1),
    targets: targetsFromEnv(process.env.BENCH_TARGETS),
    serverNodeArgs: (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean),
    layers: process.env.BENCH_LAYERS !== '0',
    resultsFile: RESULTS_FILE,
  }
}

function targetName(h: Host): string {
  if (h.kind === 'standalone') return 'Berth (pnpm start)'
  return h.kind === 'bare' ? 'bare node:http' : h.kind === 'h3' ? 'bare h3' : 'Berth'
}

/**
 * Run the HTTP benchmark, print its table and write bench/results/http.json.
 *
 * @example
 * ```ts
 * const report = await main({ durationMs: 3000, resultsFile: null })
 * report.pass // Berth ≥ 0.5 × bare node:http with every storage driver
 * ```
 */
export async function main(options: Partial<HttpBenchOptions> = {}): Promise<HttpBenchReport> {
  const opts = { ...optionsFromEnv(), ...options }
  // Tracing on: hosts forked from here on export to the sink (bench/lib/server-host.ts reads BENCH_OTLP_URL).
  const sink = process.env.BENCH_TRACING === '1' ? await startOtlpSink() : undefined
  if (sink) {
    process.env.BENCH_OTLP_URL = sink.tracesUrl
    if (opts.resultsFile === RESULTS_FILE) opts.resultsFile = RESULTS_FILE.replace(/\.json$/, '-tracing.json')
  }

  console.log(
    '\nHTTP: authenticated GET /v1/profiles/:id — Berth (request log on) vs bare node:http and bare h3 (same response bytes)',
  )
  console.log(
    `  ${opts.connections} keep-alive connections from a separate process, ${opts.warmupMs} ms warm-up, ` +
      `${opts.durationMs} ms measured${opts.rounds > 1 ? `, ${opts.rounds} rounds (medians)` : ''}; ` +
      `node ${process.version}, ${cpus().length} CPUs`,
  )

  // Each server in its own process. Berth first: the bare server answers Berth's bytes.
  const hosts: Host[] = []
  const closed = new Map<Host, Awaited<ReturnType<Host['close']>>>()
  const runs = new Map<Host, Measurement[]>()
  try {
    for (const kind of ['memory', 'fs'] as const) {
      if (opts.targets.includes(kind)) hosts.push(await startHost({ kind }, opts.serverNodeArgs))
    }
    if (opts.targets.includes('standalone')) hosts.push(await startStandalone(opts.serverNodeArgs))
    if (opts.targets.includes('bare')) {
      let ref = hosts[0]
      const temporary = !ref
      if (!ref) ref = await startHost({ kind: 'memory' })
      const bare = await startHost(
        { kind: 'bare', bodyBase64: ref.bodyBase64, contentType: ref.contentType },
        opts.serverNodeArgs,
      )
      // The same request line and headers as Berth gets (the bare server ignores them).
      Object.assign(bare, { path: ref.path, headers: ref.headers })
      if (temporary) await ref.close()
      hosts.unshift(bare)
    }
    if (opts.targets.includes('h3')) {
      const ref = hosts.find((h) => h.kind !== 'bare')
      const body = ref ?? hosts[0]
      if (!body) throw new Error('BENCH_TARGETS: h3 needs memory, fs or bare too (it answers their bytes)')
      const h3 = await startHost(
        { kind: 'h3', bodyBase64: body.bodyBase64, contentType: body.contentType },
        opts.serverNodeArgs,
      )
      // The same request line and headers as Berth gets; the route pattern is Berth's.
      Object.assign(h3, { path: body.path, headers: body.headers })
      hosts.splice(hosts[0]?.kind === 'bare' ? 1 : 0, 0, h3)
    }
    if (hosts[0]?.serverDir && process.env.BENCH_SERVER_DIR)
      console.log(`  @berth/server from ${hosts[0].serverDir} (BENCH_SERVER_DIR)`)

    for (let round = 1; round <= opts.rounds; round++) {
      // Alternate the order between rounds so drift in machine load hits every target alike.
      const order = round % 2 === 1 ? hosts : [...hosts].reverse()
      for (const h of order) {
        process.stdout.write(
          `  measuring ${targetName(h)}${h.kind === 'bare' ? '' : ` — ${h.storage}`}${opts.rounds > 1 ? `, round ${round}` : ''} …`,
        )
        const r = await measure(h, opts)
        runs.set(h, [...(runs.get(h) ?? []), r])
        process.stdout.write(` ${int(r.rps)} req/s\n`)
      }
    }
  } finally {
    for (const h of hosts) {
      try {
        closed.set(h, await h.close())
      } catch (err) {
        console.error(`  closing ${targetName(h)} failed: ${(err as Error).message}`)
      }
    }
    if (sink) {
      const got = sink.received()
      console.log(`  tracing on: the OTLP sink received ${got.requests} exports, ${int(got.bytes)} bytes`)
      delete process.env.BENCH_OTLP_URL
      await sink.close()
    }
  }

  const bare = hosts.find((h) => h.kind === 'bare')
  const bareRuns = bare ? runs.get(bare)! : []
  const h3 = hosts.find((h) => h.kind === 'h3')
  const h3Runs = h3 ? runs.get(h3)! : []
  const results: TargetResult[] = hosts.map((h) => {
    const rs = runs.get(h)!
    const mid = [...rs].sort((a, b) => a.rps - b.rps)[(rs.length - 1) >> 1]!
    const ratio = h === bare ? 1 : median(rs.map((r, i) => r.rps / (bareRuns[i]?.rps ?? NaN)))
    const ratioH3 = h === h3 ? 1 : median(rs.map((r, i) => r.rps / (h3Runs[i]?.rps ?? NaN)))
    const berth = isBerth(h.kind)
    const cpuRatio =
      h === bare ? 1 : median(rs.map((r, i) => (bareRuns[i]?.serverCpuUsPerRequest ?? NaN) / r.serverCpuUsPerRequest))
    const { limiter, logBytes } = closed.get(h) ?? {}
    return {
      ...mid,
      target: targetName(h),
      kind: h.kind,
      storage: h.storage,
      ratio,
      cpuRatio,
      verdict: !berth ? 'baseline' : !bare ? 'no baseline' : ratio >= TARGET_RATIO ? 'PASS' : 'BELOW TARGET',
      ratioH3,
      verdictH3: !berth ? 'baseline' : !h3 ? 'no baseline' : ratioH3 >= TARGET_H3_RATIO ? 'PASS' : 'BELOW TARGET',
      rounds: rs,
      ...(limiter && { limiter }),
      ...(logBytes !== undefined && { logBytes }),
    }
  })

  console.log()
  console.log(
    table(
      [
        'target',
        'storage',
        'req/s',
        'p50 ms',
        'p99 ms',
        'errors',
        'server CPU',
        'CPU µs/req',
        'vs bare',
        `target ≥ ${TARGET_RATIO}`,
        'vs h3',
        `target ≥ ${TARGET_H3_RATIO}`,
      ],
      results.map((r) => [
        r.target,
        r.storage,
        int(r.rps),
        ms(r.latencyMs.p50),
        ms(r.latencyMs.p99),
        String(r.errors),
        `${Math.round(r.serverCpuCores * 100)}%`,
        int(r.serverCpuUsPerRequest),
        Number.isFinite(r.ratio) ? r.ratio.toFixed(2) : 'n/a',
        r.verdict === 'baseline' ? '—' : r.verdict === 'no baseline' ? 'n/a' : r.verdict,
        Number.isFinite(r.ratioH3) ? r.ratioH3.toFixed(2) : 'n/a',
        r.verdictH3 === 'baseline' ? '—' : r.verdictH3 === 'no baseline' ? 'n/a' : r.verdictH3,
      ]),
    ),
  )
  const ref = hosts.find((h) => isBerth(h.kind)) ?? hosts[0]
  console.log(
    `  server CPU: share of one core used by the server process in the window; response body ${ref?.body.length ?? 0} bytes; ` +
      `load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  )
  const berthRows = results.filter((r) => isBerth(r.kind) && Number.isFinite(r.cpuRatio))
  if (berthRows.length) {
    console.log(
      `  CPU per request vs bare (bare µs/req ÷ Berth µs/req, independent of how the 2 cores are shared): ` +
        berthRows.map((r) => `${r.kind} ${r.cpuRatio.toFixed(2)}`).join(', '),
    )
  }
  const gen = Math.max(...results.map((r) => r.generatorCpuCores))
  if (gen > 0.9)
    console.log(`  ! the load generator used ${Math.round(gen * 100)}% of a core: it may be what limits req/s`)
  const busy = results
    .map((r) => ({ r, other: Math.max(...r.rounds.map((x) => x.otherCpuCores).filter(Number.isFinite)) }))
    .filter((x) => x.other > 0.25)
  if (busy.length) {
    const list = busy
      .map((x) => `${x.other.toFixed(2)} cores during ${x.r.target}${x.r.kind === 'bare' ? '' : ` (${x.r.kind})`}`)
      .join(', ')
    console.log(`  ! other processes were busy (${list}): req/s is noisy there; CPU µs/req is steadier`)
  }
  for (const r of results) {
    if (r.errors > 0) console.log(`  ${r.target} (${r.storage}) errors: ${r.errorSamples.join('; ')}`)
    if (r.limiter) {
      const counted = r.limiter.burst - r.limiter.remaining
      console.log(
        `  rate limiter (${r.kind}): counted ${int(counted)} requests over the run (warm-up included), refused none`,
      )
    }
    if (r.logBytes !== undefined) console.log(`  request log (${r.kind}): ${int(r.logBytes)} bytes written to its file`)
  }

  const standalone = results.find((r) => r.kind === 'standalone')
  const layers =
    standalone && opts.layers
      ? await layerBreakdown(opts, median(standalone.rounds.map((r) => r.serverCpuUsPerRequest)))
      : undefined

  const report: HttpBenchReport = {
    benchmark: 'http',
    request: 'GET /v1/profiles/:id with Authorization: Bearer <caller key>',
    date: new Date().toISOString(),
    node: process.version,
    cpus: { count: cpus().length, model: cpus()[0]?.model ?? 'unknown' },
    config: {
      connections: opts.connections,
      warmupMs: opts.warmupMs,
      durationMs: opts.durationMs,
      rounds: opts.rounds,
      targets: opts.targets,
      serverNodeArgs: opts.serverNodeArgs,
      layers: opts.layers,
      ...(hosts.find((h) => h.serverDir) && { serverDir: hosts.find((h) => h.serverDir)!.serverDir! }),
      rateLimit: RATE_LIMIT,
      bodyBytes: ref?.body.length ?? 0,
    },
    targetRatio: TARGET_RATIO,
    results,
    pass: !!bare && results.every((r) => r.verdict === 'PASS' || r.verdict === 'baseline'),
    targetH3Ratio: TARGET_H3_RATIO,
    passH3: !!h3 && results.every((r) => r.verdictH3 === 'PASS' || r.verdictH3 === 'baseline'),
    loadAverage: loadavg(),
    ...(layers && { layers }),
  }
  if (opts.resultsFile && opts.targets.length < ALL_TARGETS.length) {
    console.log(`  results not written: BENCH_TARGETS picks a subset (${opts.targets.join(',')})`)
  } else if (opts.resultsFile) {
    mkdirSync(dirname(opts.resultsFile), { recursive: true })
    writeFileSync(opts.resultsFile, `${JSON.stringify(report, null, 2)}\n`)
    console.log(`  results written to ${opts.resultsFile}`)
  }
  return report
}

// Run directly: node --import tsx bench/http.ts
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await main()
}
