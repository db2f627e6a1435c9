/**
 * Tasks benchmark, per engine (Podman, Docker), on one machine with the offline model:
 * - latency: what Berth adds to a task over running the runner directly. The direct
 *   baseline execs the runner (the bundle mounted read-only at /opt/berth-runner) through
 *   the same adapter, in a container claimed from the same warm pool, with the same stdin
 *   Berth sent for an earlier task, and times exec → first `token` line and → `result`
 *   line. Through Berth, a caller submits a batch task with the same prompt
 *   (`POST /v1/tasks`), follows it over the WebSocket (`/v1/ws`), and times submit → first
 *   `token` event and → the `completed` status. The two alternate, each one on a settled
 *   pool (back at `min` idle, nothing in use). Target: Berth's p50 minus the direct p50
 *   under 25 ms, for both. A probe inside the server process (bench/lib/task-probe.ts)
 *   splits Berth's time into steps.
 * - throughput: a bounded number of batch tasks at a fixed concurrency (profile
 *   concurrency and pool max), wall time → tasks completed per minute.
 *
 * The server runs in its own process from the built packages (bench/lib/task-host.ts);
 * this process is the caller. Everything binds to 127.0.0.1; every loop is bounded.
 *
 *   node --import tsx bench/tasks.ts        (or via bench/run.ts: export main())
 *
 * Knobs: BENCH_TASKS_ITERATIONS (20), BENCH_TASKS_WARMUP (2), BENCH_TASKS_THROUGHPUT (60),
 * BENCH_TASKS_CONCURRENCY (8), BENCH_TASKS_POOL_MIN (2), BENCH_TASKS_ENGINES
 * (`podman,docker`), BENCH_TASKS_STORAGE (`fs` | `memory`), BENCH_TASKS_AFTER_LOAD (5),
 * BENCH_TASKS_PRELOAD_KEYS (0), BENCH_SERVER_DIR, BENCH_SERVER_NODE_ARGS.
 */
import { runAsScript, writeResults } from './lib/results.js'
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { connectEngine } from '@berth/adapter-docker'
import { bundleRunner } from '@berth/runner'
import { ensureEngines, findRepoRoot, type EngineInfo } from '@berth/testkit'
import { forkTs, type Child } from './lib/child.js'
import { busyCores, machineCpu } from './lib/machine.js'
import { summarize, wallNow, type Summary } from './lib/stats.js'
import { ms, table } from './lib/table.js'
import { connectClient, type ClientTask, type TaskClient } from './lib/task-client.js'
import type { DirectDone, TaskHostConfig, TaskHostReady, TaskStoreUse, Traces } from './lib/task-host.js'
import type { ExecTrace, TaskTrace } from './lib/task-probe.js'

const env = process.env
const ITERATIONS = Number(env.BENCH_TASKS_ITERATIONS ?? 20)
const WARMUP = Number(env.BENCH_TASKS_WARMUP ?? 2)
const THROUGHPUT_TASKS = Number(env.BENCH_TASKS_THROUGHPUT ?? 60)
const CONCURRENCY = Number(env.BENCH_TASKS_CONCURRENCY ?? 8)
const POOL_MIN = Number(env.BENCH_TASKS_POOL_MIN ?? 2)
const AFTER_LOAD = Number(env.BENCH_TASKS_AFTER_LOAD ?? 5)
const PRELOAD_KEYS = Number(env.BENCH_TASKS_PRELOAD_KEYS ?? 0)
const ENGINES = (env.BENCH_TASKS_ENGINES ?? 'podman,docker')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean) as EngineInfo['engine'][]
const STORAGE = (env.BENCH_TASKS_STORAGE ?? 'fs') as 'fs' | 'memory'
const SERVER_NODE_ARGS = (env.BENCH_SERVER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean)
/** Berth may add at most this much at p50, to the first token and to the result. */
export const TARGET_ADDED_MS = 25
/** The offline model answers `ok` in one turn, no tools. */
const PROMPT = '[[berth:text ok]]'
/** No task may take longer than this (a stuck task fails the benchmark instead of hanging it). */
const TASK_TIMEOUT_MS = 120_000
const LABEL = 'berth.bench'

type Verdict = 'PASS' | 'BELOW'

interface Latency {
  direct: { firstToken: Summary; result: Summary; attach: Summary; resultToExit: Summary }
  berth: { firstToken: Summary; result: Summary; resultEvent: Summary }
  /** Berth p50 minus direct p50. */
  addedP50: { firstToken: number; result: number }
  /**
   * Rough standard error of `addedP50` (1.25·sd/√n per median, combined): two unpaired
   * medians of a run that itself varies by ±100 ms or more cannot resolve a few ms.
   */
  addedP50Noise: { firstToken: number; result: number }
  /**
   * Per task, Berth's total minus its own runner's time (exec called → the same line):
   * the time spent outside the runner, paired within each task, so it does not carry the
   * runner's run-to-run spread.
   */
  outsideRunner: { firstToken: Summary; result: Summary }
  /** On `addedP50` (Berth p50 minus direct p50). */
  verdict: { firstToken: Verdict; result: Verdict }
  /** On `outsideRunner` p50: the same target, without the runner's spread between two samples. */
  pairedVerdict: { firstToken: Verdict; result: Verdict }
  /** Tasks whose subscription came after the first token was published (replayed, so their first-token time is late). */
  lateSubscriptions: number
  /** Claims that took over 50 ms (not warm, or the server's event loop was busy). */
  slowClaims: number
}

interface Throughput {
  tasks: number
  concurrency: number
  poolMax: number
  wallMs: number
  completed: number
  failed: number
  refused429: number
  tasksPerMinute: number
  submitToEnd: Summary
}

/** Per window of a task's life: storage calls per kind (p50 count, p50 summed ms). */
type StoreProfile = Record<keyof TaskStoreUse, Record<string, { calls: number; ms: number }>>

/** Berth-only tasks on a store that already holds the throughput run's records. */
interface AfterLoad {
  /** Keys in the store before / after the measured tasks. */
  storeKeys: number
  tasks: number
  /** Submit → runner exec called, p50 (ms): compare with the same step in the latency runs. */
  beforeExec: Summary
  /** Same, in the latency runs (fewer records stored). */
  beforeExecLatencyRuns: Summary
  store: StoreProfile
}

interface EngineResult {
  engine: string
  version: string
  storage: string
  serverDir: string
  clockOffsetMs: number
  latency: Latency
  /** Where Berth's time goes, per step, over the measured tasks (ms). */
  breakdown: Record<string, Summary>
  /** Storage calls per task and window, and the store's size after the latency runs. */
  store: { keys: number; profile: StoreProfile }
  /** Null when BENCH_TASKS_THROUGHPUT is 0. */
  throughput: Throughput | null
  afterLoad: AfterLoad | null
  /** How long the latency runs took, and the whole machine's busy cores meanwhile (this benchmark included), from /proc/stat. */
  latencyPhase: { ms: number; machineBusyCores: number }
  samples: { direct: ExecTrace[]; berth: (ClientTask & { server: TaskTrace })[] }
}

/** A progress line, rewritten in place on a terminal; `null` ends it. Nothing when stdout is a file. */
function progress(text: string | null): void {
  if (!process.stdout.isTTY) return
  process.stdout.write(text === null ? '\n' : `\r  ${text}`)
}

function sd(xs: number[]): number {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length
  return Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / Math.max(1, xs.length - 1))
}

/** Approximate standard error of the difference of two sample medians. */
function medianDiffError(a: number[], b: number[]): number {
  const se = (xs: number[]) => (1.2533 * sd(xs)) / Math.sqrt(xs.length)
  return Math.hypot(se(a), se(b))
}

const verdict = (added: number): Verdict => (added < TARGET_ADDED_MS ? 'PASS' : 'BELOW')

function withTimeout<T>(p: Promise<T>, what: string, timeoutMs = TASK_TIMEOUT_MS): Promise<T> {
  let timer: ReturnType<typeof setTimeout>
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${timeoutMs} ms`)), timeoutMs)
    }),
  ])
}

/** The host's clock minus ours, from the round trip with the smallest delay. */
async function clockOffset(host: Child): Promise<number> {
  let best = { rtt: Infinity, offset: 0 }
  for (let i = 0; i < 20; i++) {
    const t0 = wallNow()
    host.send({ type: 'clock' })
    const { now } = await host.next<{ now: number }>('clock', 5_000)
    const t1 = wallNow()
    if (t1 - t0 < best.rtt) best = { rtt: t1 - t0, offset: now - (t0 + t1) / 2 }
  }
  return best.offset
}

interface Session {
  host: Child
  client: TaskClient
  ready: TaskHostReady
  settle(): Promise<void>
  berth(): Promise<ClientTask>
  direct(id: string): Promise<DirectDone>
}

async function openSession(info: EngineInfo, bundleDir: string): Promise<Session> {
  const host = forkTs('task-host.ts', SERVER_NODE_ARGS)
  const cfg: TaskHostConfig = {
    kind: 'tasks',
    engine: info.engine,
    socketPath: info.socketPath,
    image: info.image,
    bundleDir,
    storage: STORAGE,
    pool: {
      name: `bench-tasks-${process.pid}`,
      min: POOL_MIN,
      max: CONCURRENCY,
      labels: { [LABEL]: String(process.pid) },
    },
    concurrency: CONCURRENCY,
    preloadKeys: PRELOAD_KEYS,
  }
  try {
    host.send(cfg)
    const ready = await host.next<TaskHostReady>('ready', 180_000)
    const client = await connectClient(`http://127.0.0.1:${ready.port}`, ready.token)
    const body = { mode: 'batch', profile_id: ready.profileId, prompt: PROMPT }
    return {
      host,
      client,
      ready,
      async settle() {
        host.send({ type: 'settle' })
        await host.next('settled', 70_000)
      },
      async berth() {
        const t = await withTimeout(client.run(body), 'a task through Berth')
        if (t.status !== 'completed') throw new Error(`task ${t.id} ended ${t.status}: ${JSON.stringify(t.error)}`)
        return t
      },
      async direct(id) {
        host.send({ type: 'direct', id })
        const d = await host.next<DirectDone>('direct-done', TASK_TIMEOUT_MS)
        if (d.trace.exitCode !== 0 || d.trace.resultLine === undefined) {
          throw new Error(`direct runner exited ${d.trace.exitCode} without a result: ${d.stderrTail}`)
        }
        return d
      },
    }
  } catch (err) {
    host.kill()
    throw err
  }
}

async function closeSession(s: Session | undefined): Promise<void> {
  if (!s) return
  s.client.close()
  try {
    s.host.send({ type: 'close' })
    await s.host.next('closed', 60_000)
  } catch (err) {
    console.error(`closing the task host: ${(err as Error).message}`)
  } finally {
    s.host.kill()
  }
}

/** Steps of one Berth task, in the caller's clock (ms). Missing steps are NaN. */
function steps(t: ClientTask, s: TaskTrace, offset: number): Record<string, number> {
  const h = (x: number | undefined) => (x === undefined ? NaN : x - offset)
  const e = s.exec
  const d = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? NaN : b - a)
  return {
    'caller → server: POST /v1/tasks arrives': h(s.arrival) - t.submit,
    'submit handled (auth, validation, records) → queued': d(s.arrival, s.status.queued),
    'arrival → 202 written': d(s.arrival, s.responded),
    'caller: 202 read (round trip)': t.accepted - t.submit,
    'queued → pool.claim called': d(s.status.queued, s.claimCalled),
    'pool.claim (warm)': d(s.claimCalled, s.claimed),
    'claimed → starting': d(s.claimed, s.status.starting),
    'starting → running (workspace, materialize)': d(s.status.starting, s.status.running),
    'running → runner exec called': d(s.status.running, e?.called),
    'exec create+start+attach (adapter)': d(e?.called, e?.attached),
    'runner: exec → first token line': d(e?.called, e?.tokenLine),
    'token line → token published (parse, event log)': d(e?.tokenLine, s.tokenPublished),
    'token published → caller (WebSocket)': t.token! - h(s.tokenPublished),
    'runner: exec → result line': d(e?.called, e?.resultLine),
    'result line → exec exit (runner exits)': d(e?.resultLine, e?.exit),
    'exit → completed published (workspace idle, task record, log flush)': d(e?.exit, s.status.completed),
    'completed published → caller (WebSocket)': t.end! - h(s.status.completed),
  }
}

function storeProfile(rows: { server: { store: TaskStoreUse } }[]): StoreProfile {
  const out = {} as StoreProfile
  for (const w of ['submit', 'beforeExec', 'duringRun', 'finish'] as const) {
    const ops = new Set(rows.flatMap((r) => Object.keys(r.server.store[w].calls)))
    out[w] = {}
    for (const op of [...ops].sort()) {
      out[w][op] = {
        calls: summarize(rows.map((r) => r.server.store[w].calls[op] ?? 0)).p50,
        ms: summarize(rows.map((r) => r.server.store[w].ms[op] ?? 0)).p50,
      }
    }
  }
  return out
}

/** Submit → runner exec called, in the caller's clock. */
const beforeExec = (t: ClientTask, s: TaskTrace, offset: number) => (s.exec ? s.exec.called - offset - t.submit : NaN)

async function traces(s: Session, ids: string[]): Promise<Traces> {
  s.host.send({ type: 'traces', ids })
  return s.host.next<Traces>('traces', 30_000)
}

async function benchEngine(info: EngineInfo, bundleDir: string): Promise<EngineResult> {
  let session: Session | undefined
  try {
    session = await openSession(info, bundleDir)
    const s = session
    const offset = await clockOffset(s.host)

    // Warm-up, not recorded (at least one round: the first Berth task gives the direct baseline its stdin).
    for (let i = 0; i < Math.max(1, WARMUP); i++) {
      await s.settle()
      await s.berth()
      await s.settle()
      await s.direct(`task_benchwarm${i}`)
    }

    const berth: ClientTask[] = []
    const direct: ExecTrace[] = []
    const cpu0 = machineCpu()
    const t0 = performance.now()
    for (let i = 0; i < ITERATIONS; i++) {
      const runs = [
        async () => berth.push(await s.berth()),
        async () => direct.push((await s.direct(`task_benchdirect${i}`)).trace),
      ]
      // Alternate which goes first, so neither always meets the machine in the same state.
      if (i % 2) runs.reverse()
      for (const run of runs) {
        await s.settle()
        await run()
      }
      progress(`${info.engine}: latency ${i + 1}/${ITERATIONS}`)
    }
    const latencyMs = performance.now() - t0
    const cpu1 = machineCpu()
    progress(null)

    const { tasks, storeKeys } = await traces(
      s,
      berth.map((t) => t.id),
    )
    const rows = berth.map((t) => ({ ...t, server: tasks[t.id]! }))

    const dFirst = direct.map((e) => e.tokenLine! - e.called)
    const dResult = direct.map((e) => e.resultLine! - e.called)
    const bFirst = berth.map((t) => t.token! - t.submit)
    const bResult = berth.map((t) => t.end! - t.submit)
    const firstToken = { direct: summarize(dFirst), berth: summarize(bFirst) }
    const result = { direct: summarize(dResult), berth: summarize(bResult) }
    const added = {
      firstToken: firstToken.berth.p50 - firstToken.direct.p50,
      result: result.berth.p50 - result.direct.p50,
    }
    const noise = { firstToken: medianDiffError(dFirst, bFirst), result: medianDiffError(dResult, bResult) }
    const stepRows = rows.map((r) => steps(r, r.server, offset))
    const breakdown: Record<string, Summary> = {}
    for (const key of Object.keys(stepRows[0] ?? {})) breakdown[key] = summarize(stepRows.map((r) => r[key]!))
    const outsideFirst = rows.map((r) => r.token! - r.submit - (r.server.exec!.tokenLine! - r.server.exec!.called))
    const outsideResult = rows.map((r) => r.end! - r.submit - (r.server.exec!.resultLine! - r.server.exec!.called))

    const latency: Latency = {
      direct: {
        firstToken: firstToken.direct,
        result: result.direct,
        attach: summarize(direct.map((e) => e.attached! - e.called)),
        resultToExit: summarize(direct.map((e) => e.exit! - e.resultLine!)),
      },
      berth: {
        firstToken: firstToken.berth,
        result: result.berth,
        resultEvent: summarize(berth.map((t) => t.resultEvent! - t.submit)),
      },
      addedP50: added,
      addedP50Noise: noise,
      outsideRunner: { firstToken: summarize(outsideFirst), result: summarize(outsideResult) },
      verdict: { firstToken: verdict(added.firstToken), result: verdict(added.result) },
      pairedVerdict: {
        firstToken: verdict(summarize(outsideFirst).p50),
        result: verdict(summarize(outsideResult).p50),
      },
      lateSubscriptions: rows.filter(
        (r) => r.server.tokenPublished !== undefined && r.ack! > r.server.tokenPublished - offset,
      ).length,
      slowClaims: rows.filter((r) => (r.server.claimed ?? Infinity) - (r.server.claimCalled ?? 0) > 50).length,
    }

    const throughput = THROUGHPUT_TASKS > 0 ? await benchThroughput(s) : null

    // A few more, one at a time, now that the store holds the throughput run's records too.
    let afterLoad: AfterLoad | null = null
    if (AFTER_LOAD > 0) {
      const late: ClientTask[] = []
      for (let i = 0; i < AFTER_LOAD; i++) {
        await s.settle()
        late.push(await s.berth())
      }
      const after = await traces(
        s,
        late.map((t) => t.id),
      )
      const lateRows = late.map((t) => ({ ...t, server: after.tasks[t.id]! }))
      afterLoad = {
        storeKeys: after.storeKeys,
        tasks: late.length,
        beforeExec: summarize(lateRows.map((r) => beforeExec(r, r.server, offset))),
        beforeExecLatencyRuns: summarize(rows.map((r) => beforeExec(r, r.server, offset))),
        store: storeProfile(lateRows),
      }
    }
    return {
      engine: info.engine,
      version: info.version,
      storage: STORAGE === 'fs' ? 'unstorage fs (temp dir, cached reads)' : 'unstorage memory',
      serverDir: s.ready.serverDir,
      clockOffsetMs: offset,
      latency,
      breakdown,
      store: { keys: storeKeys, profile: storeProfile(rows) },
      throughput,
      afterLoad,
      latencyPhase: { ms: latencyMs, machineBusyCores: busyCores(cpu0, cpu1) },
      samples: { direct, berth: rows },
    }
  } finally {
    await closeSession(session)
  }
}

/** `THROUGHPUT_TASKS` batch tasks, `CONCURRENCY` in flight at a time (each caller slot submits its next when one ends). */
async function benchThroughput(s: Session): Promise<Throughput> {
  await s.settle()
  const refused = { refused: 0 }
  const client = await connectClient(`http://127.0.0.1:${s.ready.port}`, s.ready.token, refused)
  const body = { mode: 'batch', profile_id: s.ready.profileId, prompt: PROMPT }
  const done: ClientTask[] = []
  let next = 0
  const t0 = wallNow()
  try {
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < THROUGHPUT_TASKS) {
          next++
          done.push(await withTimeout(client.run(body), 'a task under load'))
          progress(`throughput ${done.length}/${THROUGHPUT_TASKS}`)
        }
      }),
    )
  } finally {
    client.close()
  }
  const wallMs = wallNow() - t0
  progress(null)
  const completed = done.filter((t) => t.status === 'completed').length
  return {
    tasks: THROUGHPUT_TASKS,
    concurrency: CONCURRENCY,
    poolMax: CONCURRENCY,
    wallMs,
    completed,
    failed: done.length - completed,
    refused429: refused.refused,
    tasksPerMinute: (completed / wallMs) * 60_000,
    submitToEnd: summarize(done.map((t) => t.end! - t.submit)),
  }
}

/** Remove whatever this run's pools left on an engine (the hosts remove their own; this is for crashes). */
async function sweep(info: EngineInfo): Promise<void> {
  const { docker } = connectEngine({ socketPath: info.socketPath })
  const left = await docker
    .listContainers({ all: true, filters: { label: [`${LABEL}=${process.pid}`] } })
    .catch(() => [])
  await Promise.all(
    left.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => {}),
    ),
  )
}

function storeTable(p: StoreProfile): string {
  const rows = Object.entries(p).flatMap(([w, ops]) =>
    Object.entries(ops).map(([op, v]) => [w, op, String(v.calls), ms(v.ms)]),
  )
  return table(['window', 'call', 'calls', 'summed ms'], rows)
}

function print(results: EngineResult[]): void {
  const x = (n: number) => (Number.isFinite(n) ? `${n >= 0 ? '+' : ''}${n.toFixed(2)}` : 'n/a')
  console.log(
    `\nTasks: submit → first token / result, Berth vs the runner exec'd directly (ms, ${ITERATIONS} each, interleaved)`,
  )
  console.log(
    table(
      [
        'engine',
        'measure',
        'direct p50',
        'direct p99',
        'Berth p50',
        'Berth p99',
        'added p50',
        'verdict',
        'outside runner p50',
        'paired verdict',
      ],
      results.flatMap((r) =>
        (['firstToken', 'result'] as const).map((m) => [
          r.engine,
          m === 'firstToken' ? 'first token' : 'result',
          ms(r.latency.direct[m].p50),
          ms(r.latency.direct[m].p99),
          ms(r.latency.berth[m].p50),
          ms(r.latency.berth[m].p99),
          `${x(r.latency.addedP50[m])} ± ${r.latency.addedP50Noise[m].toFixed(0)}`,
          r.latency.verdict[m],
          ms(r.latency.outsideRunner[m].p50),
          r.latency.pairedVerdict[m],
        ]),
      ),
    ),
  )
  console.log(
    `  Target: under ${TARGET_ADDED_MS} ms added at p50. direct: exec called → the line, in the server process. Berth: POST /v1/tasks sent → WebSocket message read, in the caller.\n` +
      "  ± : rough standard error of the unpaired difference (the runner's own spread).\n" +
      "  outside runner: per task, Berth's time minus its own runner's exec → the same line (paired, so the runner's spread cancels).",
  )
  for (const r of results) {
    console.log(`\nWhere Berth's time goes, ${r.engine} (ms; server-side steps from a probe in the server process)`)
    console.log(
      table(
        ['step', 'p50', 'p99'],
        Object.entries(r.breakdown).map(([k, v]) => [k, ms(v.p50), ms(v.p99)]),
      ),
    )
    console.log(
      `  direct baseline: exec create+start+attach p50 ${ms(r.latency.direct.attach.p50)}, result line → exit p50 ${ms(r.latency.direct.resultToExit.p50)}` +
        `; late subscriptions ${r.latency.lateSubscriptions}, claims over 50 ms ${r.latency.slowClaims}`,
    )
    console.log(
      `\nStorage calls per task, ${r.engine} (p50 per task; ${r.store.keys} keys in the store after the latency runs)`,
    )
    console.log(storeTable(r.store.profile))
    if (r.afterLoad) {
      const a = r.afterLoad
      console.log(
        `\nAfter the throughput run (${a.storeKeys} keys stored), ${a.tasks} more tasks: submit → runner exec called p50 ${ms(a.beforeExec.p50)} ms ` +
          `(latency runs: ${ms(a.beforeExecLatencyRuns.p50)} ms)`,
      )
      console.log(storeTable(a.store))
    }
  }
  if (!results.some((r) => r.throughput)) return
  console.log(`\nThroughput: batch tasks with the offline model (prompt ${PROMPT})`)
  console.log(
    table(
      ['engine', 'tasks', 'concurrency', 'wall s', 'tasks/min', 'submit→end p50 ms', 'p99 ms', 'failed', '429 retried'],
      results
        .flatMap((r) => (r.throughput ? [{ ...r, throughput: r.throughput }] : []))
        .map((r) => [
          r.engine,
          String(r.throughput.tasks),
          String(r.throughput.concurrency),
          (r.throughput.wallMs / 1000).toFixed(1),
          r.throughput.tasksPerMinute.toFixed(1),
          ms(r.throughput.submitToEnd.p50),
          ms(r.throughput.submitToEnd.p99),
          String(r.throughput.failed),
          String(r.throughput.refused429),
        ]),
    ),
  )
}

/** Run the tasks benchmark on each engine (provisioning them if needed), print the tables, write bench/results/tasks.json. */
export async function main(): Promise<EngineResult[]> {
  const root = findRepoRoot(fileURLToPath(new URL('.', import.meta.url)))
  const { dir: bundleDir, sdkVersion } = bundleRunner(join(root, '.tmp', 'runner-bundle-bench'))
  const engines = ensureEngines(ENGINES)
  const results: EngineResult[] = []
  const load0 = loadavg()
  for (const info of engines) {
    console.log(
      `\nTasks benchmark: ${info.engine} ${info.version}, ${ITERATIONS} iterations each way (+${WARMUP} warm-up), ` +
        `then ${THROUGHPUT_TASKS} tasks at concurrency ${CONCURRENCY}…`,
    )
    try {
      results.push(await benchEngine(info, bundleDir))
    } finally {
      await sweep(info)
    }
  }
  print(results)
  writeResults('tasks', {
    cpus: cpus().length,
    loadavg: { start: load0, end: loadavg() },
    config: {
      iterations: ITERATIONS,
      warmup: WARMUP,
      prompt: PROMPT,
      storage: STORAGE,
      preloadKeys: PRELOAD_KEYS,
      pool: { min: POOL_MIN, max: CONCURRENCY },
      throughputTasks: THROUGHPUT_TASKS,
      concurrency: CONCURRENCY,
      targetAddedMs: TARGET_ADDED_MS,
      sdkVersion,
    },
    results,
  })
  return results
}

runAsScript(import.meta.url, main)
