/**
 * Warm agents vs cold starts, per engine, in one run: the same server and profile, once
 * with `pool.warmAgents` off (every task starts Node, the runner, the SDK and Claude Code
 * in its container) and once on (a task whose settings match a parked agent hands it the
 * prompt). For each: submit → first token and submit → result, one task at a time on a
 * settled pool, which path each task took, the runner's own start-up steps on the cold
 * path (BERTH_RUNNER_PROBE), and throughput at a fixed concurrency.
 *
 * Targets: first token p50 < 250 ms warm; throughput with warm agents ≥ 1.5× cold.
 *
 * Knobs: BENCH_WARM_ITERATIONS (10), BENCH_WARM_THROUGHPUT (40, 0: skip), BENCH_TASKS_CONCURRENCY (8),
 * BENCH_TASKS_POOL_MIN (2), BENCH_WARM_AGENTS (2), BENCH_TASKS_ENGINES (`podman,docker`),
 * BENCH_SERVER_NODE_ARGS.
 */
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { connectEngine } from '@berth/adapter-docker'
import { bundleRunner } from '@berth/runner'
import { ensureEngines, findRepoRoot, type EngineInfo } from '@berth/testkit'
import { forkTs, type Child } from './lib/child.js'
import { busyCores, machineCpu } from './lib/machine.js'
import { runAsScript, writeResults } from './lib/results.js'
import { summarize, wallNow, type Summary } from './lib/stats.js'
import { ms, table } from './lib/table.js'
import { connectClient, type ClientTask } from './lib/task-client.js'
import type { TaskHostConfig, TaskHostReady, Traces } from './lib/task-host.js'

const env = process.env
const ITERATIONS = Number(env.BENCH_WARM_ITERATIONS ?? 10)
const THROUGHPUT_TASKS = Number(env.BENCH_WARM_THROUGHPUT ?? 40)
const CONCURRENCY = Number(env.BENCH_TASKS_CONCURRENCY ?? 8)
const POOL_MIN = Number(env.BENCH_TASKS_POOL_MIN ?? 2)
const WARM_AGENTS = Number(env.BENCH_WARM_AGENTS ?? 2)
const ENGINES = (env.BENCH_TASKS_ENGINES ?? 'podman,docker')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean) as EngineInfo['engine'][]
const SERVER_NODE_ARGS = (env.BENCH_SERVER_NODE_ARGS ?? '').split(/\s+/).filter(Boolean)
const PROMPT = '[[berth:text ok]]'
const TASK_TIMEOUT_MS = 120_000
const LABEL = 'berth.bench'
/** Targets (issue 15). */
export const TARGET_FIRST_TOKEN_MS = 250
export const TARGET_THROUGHPUT_RATIO = 1.5
/** Stub tasks per minute at concurrency 8 on this machine before this work (issue 15: 73–76). */
export const BASELINE_TASKS_PER_MINUTE = 74.5

type Mode = 'cold' | 'warm'

interface ModeResult {
  mode: Mode
  firstToken: Summary
  result: Summary
  /** How many of the measured tasks each path served. */
  paths: Record<'warm' | 'cold', number>
  /** Cold path only: the runner's steps, ms after the exec was called (p50 over the tasks that ran cold). */
  runnerSteps: Record<string, Summary>
  throughput: {
    tasks: number
    concurrency: number
    tasksPerMinute: number
    failed: number
    warmPath: number
    machineBusyCores: number
  } | null
}

const withTimeout = <T>(p: Promise<T>, what: string) =>
  Promise.race([
    p,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`${what} took over ${TASK_TIMEOUT_MS} ms`)), TASK_TIMEOUT_MS).unref(),
    ),
  ])

async function session(info: EngineInfo, bundleDir: string, mode: Mode): Promise<ModeResult> {
  const host: Child = forkTs('task-host.ts', SERVER_NODE_ARGS)
  const cfg: TaskHostConfig = {
    kind: 'tasks',
    engine: info.engine,
    socketPath: info.socketPath,
    image: info.image,
    bundleDir,
    storage: 'fs',
    pool: {
      name: `bench-warm-${mode}-${process.pid}`,
      min: POOL_MIN,
      max: CONCURRENCY,
      labels: { [LABEL]: String(process.pid) },
    },
    concurrency: CONCURRENCY,
    preloadKeys: 0,
    warmAgents: mode === 'warm' ? WARM_AGENTS : 0,
  }
  try {
    host.send(cfg)
    const ready = await host.next<TaskHostReady>('ready', 180_000)
    const client = await connectClient(`http://127.0.0.1:${ready.port}`, ready.token)
    const body = { mode: 'batch', profile_id: ready.profileId, prompt: PROMPT }
    const run = async () => {
      const t = await withTimeout(client.run(body), 'a task')
      if (t.status !== 'completed') throw new Error(`task ${t.id} ended ${t.status}: ${JSON.stringify(t.error)}`)
      return t
    }
    const settle = async () => {
      host.send({ type: 'settle' })
      await host.next('settled', 120_000)
    }
    // Warm-up: the first task runs cold either way (and leaves an agent in warm mode).
    await run()
    const tasks: ClientTask[] = []
    for (let i = 0; i < ITERATIONS; i++) {
      await settle()
      tasks.push(await run())
      process.stdout.write(`\r${info.engine} ${mode}: ${i + 1}/${ITERATIONS}   `)
    }
    process.stdout.write('\r')
    host.send({ type: 'traces', ids: tasks.map((t) => t.id) })
    const traces = await host.next<Traces>('traces', 60_000)
    // A task the probe saw no cold exec for was handed to a warm agent.
    const cold = tasks.filter((t) => traces.tasks[t.id]?.exec)
    const runnerSteps: Record<string, Summary> = {}
    const stepNames = ['node', 'imports', 'input', 'model', 'spawn', 'init', 'request', 'token', 'result']
    for (const step of stepNames) {
      const xs = cold.map((t) => {
        const e = traces.tasks[t.id]!.exec!
        return (e.runner?.[step] ?? NaN) - e.called
      })
      if (xs.some(Number.isFinite)) runnerSteps[step] = summarize(xs.filter(Number.isFinite))
    }
    let throughput: ModeResult['throughput'] = null
    if (THROUGHPUT_TASKS > 0) {
      await settle()
      const done: ClientTask[] = []
      let next = 0
      const cpu0 = machineCpu()
      const t0 = wallNow()
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < THROUGHPUT_TASKS) {
            next++
            done.push(await withTimeout(client.run(body), 'a task under load'))
            process.stdout.write(`\r${info.engine} ${mode}: throughput ${done.length}/${THROUGHPUT_TASKS}   `)
          }
        }),
      )
      const wallMs = wallNow() - t0
      process.stdout.write('\r')
      host.send({ type: 'traces', ids: done.map((t) => t.id) })
      const tr = await host.next<Traces>('traces', 60_000)
      const completed = done.filter((t) => t.status === 'completed').length
      throughput = {
        tasks: THROUGHPUT_TASKS,
        concurrency: CONCURRENCY,
        tasksPerMinute: (completed / wallMs) * 60_000,
        failed: done.length - completed,
        warmPath: done.filter((t) => !tr.tasks[t.id]?.exec).length,
        machineBusyCores: busyCores(cpu0, machineCpu()),
      }
    }
    client.close()
    return {
      mode,
      firstToken: summarize(tasks.map((t) => t.token! - t.submit)),
      result: summarize(tasks.map((t) => t.end! - t.submit)),
      paths: { cold: cold.length, warm: tasks.length - cold.length },
      runnerSteps,
      throughput,
    }
  } finally {
    try {
      host.send({ type: 'close' })
      await host.next('closed', 60_000)
      // A profiled child (BENCH_CHILD_PROF) writes its profile as it exits.
      if (process.env.BENCH_CHILD_PROF)
        await new Promise<void>((r) => (host.process.exitCode !== null ? r() : host.process.once('exit', () => r())))
    } catch (err) {
      console.error(`closing the task host: ${(err as Error).message}`)
    }
    host.kill()
  }
}

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

export async function main(): Promise<unknown> {
  const root = findRepoRoot(fileURLToPath(new URL('.', import.meta.url)))
  const { dir: bundleDir } = bundleRunner(join(root, '.tmp', 'runner-bundle-bench'))
  const load0 = loadavg()
  const results: { engine: string; version: string; cold: ModeResult; warm: ModeResult }[] = []
  for (const info of ensureEngines(ENGINES)) {
    console.log(
      `\nWarm agents: ${info.engine} ${info.version}, ${ITERATIONS} tasks one at a time per mode, then ${THROUGHPUT_TASKS} at concurrency ${CONCURRENCY} (load average ${loadavg()[0]!.toFixed(1)})`,
    )
    try {
      const cold = await session(info, bundleDir, 'cold')
      const warm = await session(info, bundleDir, 'warm')
      results.push({ engine: info.engine, version: info.version, cold, warm })
    } finally {
      await sweep(info)
    }
  }
  const verdict = (ok: boolean) => (ok ? 'PASS' : 'BELOW TARGET')
  console.log(
    `\n${table(
      [
        'engine',
        'mode',
        'paths (warm/cold)',
        'first token p50',
        'p90',
        'result p50',
        `first token < ${TARGET_FIRST_TOKEN_MS} ms`,
      ],
      results.flatMap((r) =>
        [r.cold, r.warm].map((m) => [
          r.engine,
          m.mode,
          `${m.paths.warm}/${m.paths.cold}`,
          ms(m.firstToken.p50),
          ms(m.firstToken.p90),
          ms(m.result.p50),
          m.mode === 'warm' ? verdict(m.firstToken.p50 < TARGET_FIRST_TOKEN_MS) : '',
        ]),
      ),
    )}`,
  )
  const steps = ['node', 'imports', 'input', 'model', 'spawn', 'init', 'request', 'token', 'result']
  console.log(
    `\nThe runner's own steps on the cold path, ms after the exec was called (p50):\n${table(
      ['engine', ...steps],
      results.map((r) => [r.engine, ...steps.map((s) => ms(r.cold.runnerSteps[s]?.p50 ?? NaN))]),
    )}`,
  )
  if (THROUGHPUT_TASKS > 0) {
    console.log(
      `\nThroughput (${THROUGHPUT_TASKS} tasks, concurrency ${CONCURRENCY}; target ≥ ${TARGET_THROUGHPUT_RATIO}× ${BASELINE_TASKS_PER_MINUTE} tasks/min, the figure before this work):\n${table(
        [
          'engine',
          'mode',
          'tasks/min',
          'warm-path tasks',
          'failed',
          'busy cores',
          'CPU s/task',
          `vs ${BASELINE_TASKS_PER_MINUTE}`,
          'vs cold (same run)',
          'verdict',
        ],
        results.flatMap((r) =>
          [r.cold, r.warm].map((m) => [
            r.engine,
            m.mode,
            m.throughput!.tasksPerMinute.toFixed(1),
            String(m.throughput!.warmPath),
            String(m.throughput!.failed),
            m.throughput!.machineBusyCores.toFixed(2),
            // The machine's CPU per task over the window (every process: Berth, engine, runner, Claude Code).
            ((m.throughput!.machineBusyCores * 60) / m.throughput!.tasksPerMinute).toFixed(2),
            `${(m.throughput!.tasksPerMinute / BASELINE_TASKS_PER_MINUTE).toFixed(2)}×`,
            `${(m.throughput!.tasksPerMinute / r.cold.throughput!.tasksPerMinute).toFixed(2)}×`,
            m.mode === 'warm'
              ? verdict(m.throughput!.tasksPerMinute >= TARGET_THROUGHPUT_RATIO * BASELINE_TASKS_PER_MINUTE)
              : '',
          ]),
        ),
      )}`,
    )
  }
  writeResults('warm', {
    cpus: cpus().length,
    loadavg: { start: load0, end: loadavg() },
    config: {
      iterations: ITERATIONS,
      throughputTasks: THROUGHPUT_TASKS,
      concurrency: CONCURRENCY,
      poolMin: POOL_MIN,
      warmAgents: WARM_AGENTS,
      prompt: PROMPT,
    },
    targets: {
      firstTokenMs: TARGET_FIRST_TOKEN_MS,
      throughputRatio: TARGET_THROUGHPUT_RATIO,
      baselineTasksPerMinute: BASELINE_TASKS_PER_MINUTE,
    },
    results,
  })
  return results
}

runAsScript(import.meta.url, main)
