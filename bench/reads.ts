/**
 * Reads without a cliff (issue 43): the single-record reads callers make most, through the
 * standalone server as `pnpm start` runs it, each against bare h3 answering the same bytes
 * on the same route pattern, on SQLite (the default) and on Postgres.
 *
 * Per store, one server (`BERTH_RUNTIME=local`, the stub model, rate limits raised so none
 * refuses) is seeded through its API: a caller, a profile, one batch task run to its end, one
 * session task run to its end (its container stays warm) and one task left running. Then, per round, each read is
 * loaded for one window on Berth and one on bare h3, the order alternating between rounds,
 * so machine load falls on both alike: the ratio is Berth's req/s over bare h3's in the same
 * round, reported as the median of the rounds with their spread.
 *
 * Knobs: BENCH_READS_STORES (`sqlite,postgres`), BENCH_READS_ROUNDS (3), BENCH_CONNECTIONS
 * (32), BENCH_READS_WARMUP_MS (1000), BENCH_READS_DURATION_MS (3000), BENCH_READS_ROUTES
 * (ids below, comma-separated: task, running, workspace, session, files, profile), BENCH_READS_LAYERS (`1`: Berth runs under `--cpu-prof` and
 * each read gets a table of where its CPU goes, bench/lib/cpu-layers.ts; the profiler slows
 * Berth, so its ratios are not the figures), BENCH_PROFILE_DIR (keep those profiles),
 * BENCH_READS_ENV (`K=V …`: more settings for the server, to measure one switched off).
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { startPostgres, startRedis, type LocalPostgres, type LocalRedis } from '@berth/testkit'
import { layerShares } from './lib/cpu-layers.js'
import { startHost, type Host } from './lib/hosts.js'
import { measure, type Measurement } from './lib/measure.js'
import { processCpu } from './lib/proc-cpu.js'
import { runAsScript, writeResults } from './lib/results.js'
import { monotonicUs } from './lib/standalone-host.js'
import { summarize } from './lib/stats.js'
import { int, table } from './lib/table.js'
import { newCaller, TERMINAL, type ApiClient } from './soak/api.js'
import { startStandalone, type Standalone } from './soak/standalone.js'

/** Berth must serve at least this fraction of bare h3's requests per second on every read. */
export const TARGET = 0.8

const env = process.env
const num = (name: string, dflt: number) => (env[name] ? Number(env[name]) : dflt)
const ROUNDS = num('BENCH_READS_ROUNDS', 3)
const WINDOW = {
  connections: num('BENCH_CONNECTIONS', 32),
  warmupMs: num('BENCH_READS_WARMUP_MS', 1_000),
  durationMs: num('BENCH_READS_DURATION_MS', 3_000),
}
/** `postgres+redis`: Postgres with a Redis coordination, as several instances run (this one alone). */
type StoreName = 'sqlite' | 'postgres' | 'postgres+redis'
const STORES = (env.BENCH_READS_STORES ?? 'sqlite,postgres').split(',') as StoreName[]
const LAYERS = env.BENCH_READS_LAYERS === '1'
const ADMIN = 'bench-reads-admin-token-0123456789abcdef'

/** A read: its short id (BENCH_READS_ROUTES), its name in the table, the route pattern bare h3 serves it under, and the path seeded. */
interface Read {
  id: string
  name: string
  pattern: string
  path: string
}

type Seeded = { reads: Read[]; api: ApiClient }

/** One read's rounds on one store. */
interface ReadResult {
  store: string
  read: string
  bytes: number
  berth: Measurement[]
  h3: Measurement[]
  /** Berth's req/s over bare h3's, per round. */
  ratios: number[]
  layers?: { layer: string; share: number }[]
  /** With BENCH_READS_LAYERS: Berth's windows on the profile's clock (µs), to cut a kept profile to. */
  windows?: { startUs: number; endUs: number }[]
}

const must = (what: string, r: { status: number; body: unknown }, status: number) => {
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body as Record<string, string>
}

async function finished(api: ApiClient, taskId: string): Promise<void> {
  for (const until = Date.now() + 120_000; Date.now() < until; ) {
    const task = must('task poll', await api.call('GET', `/v1/tasks/${taskId}`), 200)
    if ((TERMINAL as readonly string[]).includes(task.status!)) {
      if (task.status !== 'completed') throw new Error(`task ${taskId} ended ${task.status}: ${JSON.stringify(task)}`)
      return
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`task ${taskId} did not end in 120 s`)
}

/**
 * A caller with a completed batch task, a completed session task (its container warm) and a
 * task still running (a Bash `sleep` in a second session): what a caller polls.
 */
async function seed(url: string): Promise<Seeded> {
  const { api, profileId } = await newCaller(url, ADMIN)
  const submit = async (mode: 'batch' | 'session', prompt = '[[berth:text The answer is 42, as computed.]]') =>
    must(`${mode} submit`, await api.call('POST', '/v1/tasks', { mode, profile_id: profileId, prompt }), 202)
  const batch = await submit('batch')
  await finished(api, batch.task_id!)
  const session = await submit('session')
  await finished(api, session.task_id!)
  const running = await submit('session', '[[berth:tool Bash {"command":"echo busy; sleep 900"}]] [[berth:text done]]')
  for (const until = Date.now() + 120_000; ; await new Promise((r) => setTimeout(r, 100))) {
    const t = must('task poll', await api.call('GET', `/v1/tasks/${running.task_id}`), 200)
    if (t.status === 'running') break
    if (Date.now() > until) throw new Error(`task ${running.task_id} is still ${t.status} after 120 s`)
  }
  const reads: Read[] = [
    { id: 'task', name: 'GET /v1/tasks/:id (ended)', pattern: '/v1/tasks/:id', path: `/v1/tasks/${batch.task_id}` },
    {
      id: 'running',
      name: 'GET /v1/tasks/:id (running)',
      pattern: '/v1/tasks/:id',
      path: `/v1/tasks/${running.task_id}`,
    },
    {
      id: 'workspace',
      name: 'GET /v1/workspaces/:id',
      pattern: '/v1/workspaces/:id',
      path: `/v1/workspaces/${batch.workspace_id}`,
    },
    {
      id: 'session',
      name: 'GET /v1/workspaces/:id (a session)',
      pattern: '/v1/workspaces/:id',
      path: `/v1/workspaces/${session.workspace_id}`,
    },
    {
      id: 'files',
      name: 'GET /v1/workspaces/:id/files',
      pattern: '/v1/workspaces/:id/files',
      path: `/v1/workspaces/${session.workspace_id}/files`,
    },
    { id: 'profile', name: 'GET /v1/profiles/:id', pattern: '/v1/profiles/:id', path: `/v1/profiles/${profileId}` },
  ]
  const picked = env.BENCH_READS_ROUTES?.split(',').map((s) => s.trim())
  return { api, reads: picked ? reads.filter((r) => picked.includes(r.id)) : reads }
}

/** What a read answers now: the bytes bare h3 will serve. */
async function answer(url: string, token: string, path: string) {
  const res = await fetch(url + path, { headers: { authorization: `Bearer ${token}` } })
  const body = Buffer.from(await res.arrayBuffer())
  if (res.status !== 200) throw new Error(`GET ${path} → ${res.status} ${body.toString()}`)
  return { body, contentType: res.headers.get('content-type') ?? 'application/json' }
}

/** The standalone server as a {@link Host} for one read, its CPU from /proc, its windows kept for the profile. */
function berthHost(server: Standalone, token: string, read: Read, body: Buffer, windows: Window[]): Host {
  let cpu0 = 0
  let t0 = 0
  const port = Number(new URL(server.url).port)
  return {
    type: 'ready',
    kind: 'standalone',
    port,
    storage: '',
    path: read.path,
    headers: { authorization: `Bearer ${token}` },
    body,
    bodyBase64: '',
    contentType: '',
    measureStart() {
      cpu0 = processCpu(server.pid)
      t0 = performance.now()
      windows.push({ read: read.name, startUs: monotonicUs(), endUs: Number.POSITIVE_INFINITY })
    },
    async measureEnd() {
      windows.at(-1)!.endUs = monotonicUs()
      return ((processCpu(server.pid) - cpu0) * 1000) / (performance.now() - t0)
    },
    close: async () => ({ type: 'closed' }),
  }
}

type Window = { read: string; startUs: number; endUs: number }

async function startServer(store: StoreName, dir: string, backends: Backends, profDir?: string) {
  const storage: Record<string, string> = { BERTH_STORAGE: 'sqlite' }
  const pg = backends.pg
  if (store !== 'sqlite') {
    const db = `bench_reads_${Date.now()}`
    execFileSync(join(pg!.binDir, 'psql'), ['-q', pg!.url, '-c', `CREATE DATABASE ${db}`], { stdio: 'ignore' })
    // libpq's variables name the unix socket: a URL cannot carry a socket path as its host.
    Object.assign(storage, {
      BERTH_STORAGE: 'postgres',
      BERTH_DATABASE_URL: `postgres:///${db}`,
      PGHOST: pg!.socketDir,
      PGPORT: String(pg!.port),
      PGUSER: 'berth',
    })
  }
  // A Redis coordination: the instance counts on others writing the store (the read cache keeps ended tasks only).
  if (store === 'postgres+redis')
    Object.assign(storage, { BERTH_REDIS_URL: backends.redis!.path, BERTH_REDIS_PREFIX: `reads-${Date.now()}:` })
  return startStandalone(
    {
      ...storage,
      BERTH_DATA_DIR: join(dir, 'data'),
      BERTH_ADMIN_TOKEN: ADMIN,
      BERTH_RUNTIME: 'local',
      BERTH_POOL_MIN: '0',
      BERTH_WARM_AGENTS: '0',
      BERTH_RATE_RPM: '60',
      BERTH_RATE_BURST: '1000000000',
      // BENCH_READS_ENV="K=V …": more settings for the server, to A/B one of them.
      ...Object.fromEntries(
        (env.BENCH_READS_ENV ?? '')
          .split(/\s+/)
          .filter(Boolean)
          .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
      ),
    },
    { nodeArgs: profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [] },
  )
}

async function stopServer(server: Standalone, dir: string) {
  server.child.kill('SIGTERM')
  const killer = setTimeout(() => server.child.kill('SIGKILL'), 30_000)
  await server.exited
  clearTimeout(killer)
  // The local runtime's sandboxes outlive their server, as Docker's containers do: remove them.
  const containers = localRuntime({ baseDir: join(dir, 'data', 'containers') })
  for (const c of await containers.list()) await containers.remove(c.id)
}

type Backends = { pg?: LocalPostgres | undefined; redis?: LocalRedis | undefined }

async function runStore(store: StoreName, backends: Backends): Promise<ReadResult[]> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-reads-'))
  const profDir = LAYERS ? (env.BENCH_PROFILE_DIR ?? join(dir, 'prof')) : undefined
  if (profDir) mkdirSync(profDir, { recursive: true })
  const server = await startServer(store, dir, backends, profDir)
  const windows: Window[] = []
  let h3: Host | undefined
  const results: ReadResult[] = []
  try {
    const { api, reads } = await seed(server.url)
    const answers = await Promise.all(reads.map((r) => answer(server.url, api.token, r.path)))
    h3 = await startHost({
      kind: 'h3',
      routes: reads.map((r, i) => ({
        pattern: r.pattern,
        path: r.path,
        bodyBase64: answers[i]!.body.toString('base64'),
        contentType: answers[i]!.contentType,
      })),
    })
    for (const [i, read] of reads.entries()) {
      const berth = berthHost(server, api.token, read, answers[i]!.body, windows)
      const bare: Host = { ...h3, path: read.path, headers: berth.headers, body: answers[i]!.body }
      const r: ReadResult = { store, read: read.name, bytes: answers[i]!.body.length, berth: [], h3: [], ratios: [] }
      for (let round = 1; round <= ROUNDS; round++) {
        const order = round % 2 ? [bare, berth] : [berth, bare]
        for (const h of order) {
          process.stdout.write(`  ${store}, ${read.name}, round ${round}: ${h === bare ? 'bare h3' : 'Berth'} …`)
          const m = await measure(h, WINDOW)
          if (m.errors) throw new Error(`${read.name} on ${h === bare ? 'bare h3' : 'Berth'}: ${m.errorSamples[0]}`)
          ;(h === bare ? r.h3 : r.berth).push(m)
          process.stdout.write(` ${int(m.rps)} req/s\n`)
        }
        r.ratios.push(r.berth.at(-1)!.rps / r.h3.at(-1)!.rps)
      }
      results.push(r)
    }
  } finally {
    await h3?.close()
    await stopServer(server, dir)
    if (profDir)
      for (const r of results) {
        r.windows = windows.filter((w) => w.read === r.read).map(({ startUs, endUs }) => ({ startUs, endUs }))
        r.layers = layerShares(profDir, r.windows)
      }
    rmSync(dir, { recursive: true, force: true })
  }
  return results
}

const spread = (xs: number[], fmt: (n: number) => string) => {
  const s = summarize(xs)
  return `${fmt(s.p50)} (${fmt(s.min)}–${fmt(s.max)})`
}
const ratio = (n: number) => n.toFixed(2)

/**
 * Run the reads benchmark, print its table and write bench/results/reads.json.
 *
 * @example
 * ```ts
 * const results = await main() // one row per store and read
 * ```
 */
export async function main(): Promise<ReadResult[]> {
  const before = loadavg()
  console.log(
    `\nReads: authenticated single-record reads, Berth (pnpm start, local runtime) vs bare h3 answering the same bytes; ` +
      `${ROUNDS} alternating rounds, ${WINDOW.connections} connections, ${WINDOW.warmupMs} ms warm-up, ${WINDOW.durationMs} ms windows`,
  )
  const backends: Backends = {}
  const results: ReadResult[] = []
  try {
    if (STORES.some((s) => s !== 'sqlite')) backends.pg = await startPostgres()
    if (STORES.includes('postgres+redis')) backends.redis = await startRedis()
    for (const store of STORES) results.push(...(await runStore(store, backends)))
  } finally {
    await backends.pg?.stop()
    await backends.redis?.stop()
  }
  const load = `load average ${before.map((x) => x.toFixed(2)).join(' ')} before, ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')} after`
  console.log()
  console.log(
    table(
      [
        'store',
        'read',
        'bytes',
        'Berth req/s',
        'bare h3 req/s',
        'Berth CPU µs/req',
        'h3 CPU µs/req',
        'vs h3 (min–max)',
        `≥ ${TARGET}`,
        'CPU vs h3',
      ],
      results.map((r) => [
        r.store,
        r.read,
        int(r.bytes),
        int(summarize(r.berth.map((m) => m.rps)).p50),
        int(summarize(r.h3.map((m) => m.rps)).p50),
        int(summarize(r.berth.map((m) => m.serverCpuUsPerRequest)).p50),
        int(summarize(r.h3.map((m) => m.serverCpuUsPerRequest)).p50),
        spread(r.ratios, ratio),
        summarize(r.ratios).p50 >= TARGET ? 'PASS' : 'BELOW',
        // Bare h3's CPU per request over Berth's, round by round: what req/s would be on an idle machine.
        ratio(summarize(r.berth.map((m, i) => r.h3[i]!.serverCpuUsPerRequest / m.serverCpuUsPerRequest)).p50),
      ]),
    ),
  )
  const other = Math.max(...results.flatMap((r) => [...r.berth, ...r.h3].map((m) => m.otherCpuCores)))
  console.log(`  ${load}; other processes used up to ${other.toFixed(2)} cores in a window`)
  console.log(
    '  vs h3: Berth req/s over bare h3 req/s in the same round (median, min–max of rounds); CPU vs h3: bare h3 CPU µs/req ' +
      'over Berth CPU µs/req, which moves far less with the machine load',
  )
  for (const r of results.filter((x) => x.layers)) {
    console.log(`\n  where ${r.read} spends its CPU (${r.store}, under --cpu-prof):`)
    console.log(
      table(
        ['layer', 'share'],
        r.layers!.map((l) => [l.layer, `${(l.share * 100).toFixed(1)}%`]),
      ),
    )
  }
  writeResults('reads', { rounds: ROUNDS, window: WINDOW, load, target: TARGET, results })
  return results
}

runAsScript(import.meta.url, main)
