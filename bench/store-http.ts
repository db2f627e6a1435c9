/**
 * Requests and tasks per second through the standalone server, SQLite against Postgres.
 *
 * Each round starts the standalone server (examples/standalone-server on the built
 * packages, as `pnpm start` runs it) once per store, the order alternating between rounds:
 * `BERTH_STORAGE=sqlite` (a fresh data dir) and `BERTH_STORAGE=postgres` (a fresh database
 * of one throwaway PostgreSQL, reached on its unix socket). The agents run on the `local`
 * runtime (the runner as a host process in bubblewrap) with the built-in `stub` model.
 * Three measures per server:
 *
 * - `GET /v1/profiles/:id`, authenticated, BENCH_STORE_HTTP_CONNECTIONS loops for
 *   BENCH_STORE_HTTP_SECONDS: requests per second.
 * - `POST /v1/tasks` then `GET /v1/tasks/:id`, the same loops: follow-ups of one session
 *   whose first prompt runs a long `sleep`, so every submit writes a task record that
 *   queues behind it and only that one runner is alive: pairs per second.
 * - BENCH_STORE_HTTP_TASKS one-turn batch tasks submitted at once and polled until all have
 *   completed: tasks per second from the first submit to the last completion.
 *
 * Next to each rate: the server process's CPU per request or task, and Postgres's (the
 * postmaster and its backends), from /proc, so that the store's share shows on a shared
 * machine. The load average is printed with the table.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { startPostgres, type LocalPostgres } from '@berth/testkit'
import { findPid, processCpu, treeCpu } from './lib/proc-cpu.js'
import { runAsScript, writeResults } from './lib/results.js'
import { summarize } from './lib/stats.js'
import { int, table } from './lib/table.js'
import { newCaller, TERMINAL, type ApiClient } from './soak/api.js'
import { startStandalone, type Standalone } from './soak/standalone.js'

const env = process.env
const ROUNDS = Number(env.BENCH_STORE_HTTP_ROUNDS ?? 3)
const SECONDS = Number(env.BENCH_STORE_HTTP_SECONDS ?? 5)
const CONNECTIONS = Number(env.BENCH_STORE_HTTP_CONNECTIONS ?? 8)
const TASKS = Number(env.BENCH_STORE_HTTP_TASKS ?? 8)
const STORES = ['sqlite', 'postgres'] as const
const ADMIN = 'bench-store-http-admin-token-0123456789'

type Store = (typeof STORES)[number]
interface Measure {
  perSec: number
  serverUs: number
  pgUs: number
}

/** Runs `loop` on every connection for SECONDS; counts what it returns, with the CPU used meanwhile. */
async function window(cpu: () => [number, number], loop: () => Promise<number>): Promise<Measure> {
  const end = performance.now() + SECONDS * 1000
  const [s0, p0] = cpu()
  const t0 = performance.now()
  const counts = await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      let n = 0
      while (performance.now() < end) n += await loop()
      return n
    }),
  )
  const [s1, p1] = cpu()
  const n = counts.reduce((a, b) => a + b, 0)
  return { perSec: n / ((performance.now() - t0) / 1000), serverUs: ((s1 - s0) / n) * 1e6, pgUs: ((p1 - p0) / n) * 1e6 }
}

const must = (what: string, r: { status: number; body: unknown }, status: number) => {
  if (r.status !== status) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`)
  return r.body as Record<string, string>
}

async function measure(server: Standalone, cpu: () => [number, number]) {
  const { api, profileId } = await newCaller(server.url, ADMIN)
  const profile = await window(cpu, async () => {
    must('profile read', await api.call('GET', `/v1/profiles/${profileId}`), 200)
    return 1
  })
  // The session's first prompt sleeps, so its follow-ups queue: records written, no runner started.
  const first = must(
    'session start',
    await api.call('POST', '/v1/tasks', {
      mode: 'session',
      profile_id: profileId,
      prompt: '[[berth:tool Bash {"command":"echo busy; sleep 120"}]] [[berth:text done]]',
    }),
    202,
  )
  const submits = await window(cpu, async () => {
    const task = must(
      'follow-up',
      await api.call('POST', '/v1/tasks', {
        mode: 'session',
        profile_id: profileId,
        session_id: first.session_id,
        prompt: '[[berth:text ok]]',
      }),
      202,
    )
    must('task read', await api.call('GET', `/v1/tasks/${task.task_id}`), 200)
    return 2
  })
  return { profile, submits, tasks: await throughput(api, profileId, cpu) }
}

/** TASKS one-turn batch tasks at once; tasks per second until the last is completed. */
async function throughput(api: ApiClient, profileId: string, cpu: () => [number, number]): Promise<Measure> {
  const [s0, p0] = cpu()
  const t0 = performance.now()
  const ids = await Promise.all(
    Array.from({ length: TASKS }, async () => {
      const body = { mode: 'batch', profile_id: profileId, prompt: '[[berth:text ok]]' }
      return must('batch submit', await api.call('POST', '/v1/tasks', body), 202).task_id!
    }),
  )
  for (const id of ids) {
    for (;;) {
      const task = must('task poll', await api.call('GET', `/v1/tasks/${id}`), 200)
      if ((TERMINAL as readonly string[]).includes(task.status!)) {
        if (task.status !== 'completed') throw new Error(`task ${id} ended ${task.status}: ${JSON.stringify(task)}`)
        break
      }
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  const seconds = (performance.now() - t0) / 1000
  const [s1, p1] = cpu()
  return { perSec: TASKS / seconds, serverUs: ((s1 - s0) / TASKS) * 1e6, pgUs: ((p1 - p0) / TASKS) * 1e6 }
}

async function run(store: Store, round: number, pg: LocalPostgres, postmaster: number) {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-store-http-'))
  const db = `bench_${store}_${round}`
  const storage: Record<string, string> = { BERTH_STORAGE: 'sqlite' }
  if (store === 'postgres') {
    execFileSync(join(pg.binDir, 'psql'), ['-q', pg.url, '-c', `CREATE DATABASE ${db}`], { stdio: 'ignore' })
    // libpq's variables name the unix socket: a URL cannot carry a socket path as its host.
    Object.assign(storage, {
      BERTH_STORAGE: 'postgres',
      BERTH_DATABASE_URL: `postgres:///${db}`,
      PGHOST: pg.socketDir,
      PGPORT: String(pg.port),
      PGUSER: 'berth',
    })
  }
  const server = await startStandalone({
    ...storage,
    BERTH_DATA_DIR: join(dir, 'data'),
    BERTH_ADMIN_TOKEN: ADMIN,
    BERTH_RUNTIME: 'local',
    BERTH_CONCURRENCY: '1000',
    BERTH_RATE_RPM: '100000000',
    BERTH_RATE_BURST: '10000000',
  })
  try {
    return await measure(server, () => [processCpu(server.pid), treeCpu(postmaster)])
  } finally {
    server.child.kill('SIGTERM')
    const killer = setTimeout(() => server.child.kill('SIGKILL'), 30_000)
    await server.exited
    clearTimeout(killer)
    // The local runtime's containers outlive their server, as Docker's do: remove them.
    const containers = localRuntime({ baseDir: join(dir, 'data', 'containers') })
    for (const c of await containers.list()) await containers.remove(c.id)
    rmSync(dir, { recursive: true, force: true })
  }
}

export async function main(): Promise<void> {
  const load = loadavg()
  const pg = await startPostgres()
  const results: { store: Store; round: number; profile: Measure; submits: Measure; tasks: Measure }[] = []
  try {
    const postmaster = findPid((cmd) => cmd.includes(`${pg.socketDir}/data`))
    if (!postmaster) throw new Error('the PostgreSQL server process was not found')
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 ? STORES : [...STORES].reverse()
      for (const store of order) results.push({ store, round, ...(await run(store, round, pg, postmaster)) })
    }
  } finally {
    await pg.stop()
  }
  const loadNote = `load average ${load.map((x) => x.toFixed(1)).join(' ')} before, ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')} after`
  console.log(
    `\nStandalone server, SQLite vs Postgres: medians of ${ROUNDS} rounds (${SECONDS} s windows, ${CONNECTIONS} connections, ${TASKS} tasks on local); ${loadNote}\n`,
  )
  const med = (store: Store, pick: (r: (typeof results)[number]) => number) =>
    summarize(results.filter((r) => r.store === store).map(pick))
  const cell = (store: Store, pick: (r: (typeof results)[number]) => number, fmt = int) => {
    const s = med(store, pick)
    return `${fmt(s.p50)} (${fmt(s.min)}–${fmt(s.max)})`
  }
  const rows = STORES.flatMap((store) =>
    (['profile', 'submits', 'tasks'] as const).map((k) => [
      store,
      { profile: 'GET profile req/s', submits: 'POST+GET task req/s', tasks: 'tasks/s completed' }[k],
      cell(store, (r) => r[k].perSec, k === 'tasks' ? (n: number) => n.toFixed(2) : int),
      cell(store, (r) => r[k].serverUs),
      cell(store, (r) => r[k].pgUs),
    ]),
  )
  console.log(table(['store', 'measure', 'rate p50 (min–max)', 'server CPU µs each', 'postgres CPU µs each'], rows))
  writeResults('store-http', {
    rounds: ROUNDS,
    seconds: SECONDS,
    connections: CONNECTIONS,
    tasks: TASKS,
    loadavg: loadNote,
    results,
  })
}

runAsScript(import.meta.url, main)
