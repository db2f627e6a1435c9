/**
 * Time to first token as a caller sees it, per engine (Docker, Podman): the standalone
 * server as users run it (bench/lib/standalone.ts: what `pnpm start` execs, the built
 * packages, default settings apart from port, data dir, the engine's socket and image, the
 * admin token and caller limits high enough for a benchmark), the offline stub model.
 * The caller submits over the WebSocket and times submit → first `token` event:
 * - cold: the first task of a fresh profile (BENCH_TTFT_COLD profiles, one task each);
 * - warm: one profile's repeated tasks, one after the other with no pause, p50 and p95
 *   over BENCH_TTFT_TASKS after BENCH_TTFT_WARMUP;
 * - each warm task cut into steps (bench/lib/ttft-steps.ts) from the spans the server
 *   exports over OTLP (its own OpenTelemetry wiring, to a receiver in this process), each
 *   step against its budget, so a regression names its step;
 * - throughput: BENCH_TTFT_THROUGHPUT tasks at concurrency BENCH_TASKS_CONCURRENCY, tasks
 *   per minute and CPU per task split between Berth, the engine and the agent.
 *
 *   node --import tsx bench/ttft.ts        (or via bench/run.ts: export main())
 *
 * Knobs: BENCH_TTFT_TASKS (20), BENCH_TTFT_WARMUP (2), BENCH_TTFT_COLD (3), BENCH_TTFT_GAP_MS (0),
 * BENCH_TTFT_THROUGHPUT (40, 0: skip), BENCH_TASKS_CONCURRENCY (8), BENCH_TASKS_ENGINES
 * (`docker,podman`), BENCH_TTFT_SERVER_ENV (extra server settings, e.g.
 * `BERTH_POOL_MIN=2 BERTH_WARM_AGENTS=2`; default none: the default configuration).
 */
import { cpus, loadavg } from 'node:os'
import { connectEngine } from '@berth/adapter-docker'
import { ensureEngines, type EngineInfo } from '@berth/testkit'
import { apiCaller } from './lib/api.js'
import { watchCpu, type CpuSplit } from './lib/cpu-split.js'
import { startSpanReceiver, type SpanReceiver } from './lib/otlp-spans.js'
import { runAsScript, writeResults } from './lib/results.js'
import { startStandalone } from './lib/standalone.js'
import { ms, table } from './lib/table.js'
import { STEPS, stepsOf, type StepName } from './lib/ttft-steps.js'
import { connectWsCaller, epochNow, type WsTask } from './lib/ws-caller.js'

const env = process.env
const TASKS = Number(env.BENCH_TTFT_TASKS ?? 20)
const WARMUP = Number(env.BENCH_TTFT_WARMUP ?? 2)
const COLD = Number(env.BENCH_TTFT_COLD ?? 3)
const THROUGHPUT = Number(env.BENCH_TTFT_THROUGHPUT ?? 40)
/** A pause between sequential tasks (ms): 0 submits the next one as the last ends, as a busy caller does. */
const GAP_MS = Number(env.BENCH_TTFT_GAP_MS ?? 0)
const CONCURRENCY = Number(env.BENCH_TASKS_CONCURRENCY ?? 8)
const ENGINES = (env.BENCH_TASKS_ENGINES ?? 'docker,podman')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean) as EngineInfo['engine'][]
const SERVER_ENV = Object.fromEntries(
  (env.BENCH_TTFT_SERVER_ENV ?? '')
    .split(/\s+/)
    .filter((kv) => kv.includes('='))
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
)
const PROMPT = '[[berth:text ok]]'
const TASK_TIMEOUT_MS = 120_000

/** Goals (issue 32). */
export const GOALS = { warmP50: 200, warmP95: 400, cold: 1000, throughputRatio: 1.5 }
/** Stub tasks per minute at concurrency 8 before issue 32 (bench/warm.ts). */
export const BASELINE_TASKS_PER_MINUTE = 74.5
/** Each step's share of the 200 ms p50 goal (ms, p50). */
export const STEP_BUDGET: Record<StepName, number> = {
  'berth in': 15,
  queue: 5,
  claim: 10,
  'hand-off': 30,
  'agent to model': 110,
  'model to token': 10,
  'token to caller': 20,
}

interface EngineResult {
  engine: string
  version: string
  serverEnv: Record<string, string>
  cold: number[]
  warm: Summary
  steps: Record<StepName, Summary>
  /** Measured tasks a warm agent took (from the runner span's `berth.runner.warm`). */
  warmAgents: number
  /** Of those, the agents whose Claude Code was up when the task took them (`berth.runner.ready`). */
  agentsUp: number
  /** The sequential caller's pace: one task every this many ms (submit to end, gaps included). */
  cycleMs: number
  /** Warm tasks from their first token to their end at the caller (the rest of a task, which a refill's CPU also competes with). */
  tail: Summary
  /** Warm tasks whose trace lacked a span (named) and so have no steps. */
  unsplit: Record<string, number>
  throughput: {
    tasks: number
    failed: number
    tasksPerMinute: number
    cpu: CpuSplit
    cpuPerTaskMs: Record<string, number>
  } | null
  load: { start: number; end: number }
}

/** p50 (median) and p95 (nearest rank) of a sample, in its unit. */
interface Summary {
  p50: number
  p95: number
  n: number
}

function summarize(xs: number[]): Summary {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  if (n === 0) return { p50: NaN, p95: NaN, n }
  const p50 = n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2
  return { p50, p95: s[Math.min(n - 1, Math.ceil(0.95 * n) - 1)]!, n }
}

const withTimeout = <T>(p: Promise<T>, what: string) =>
  Promise.race([
    p,
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`${what} took over ${TASK_TIMEOUT_MS} ms`)), TASK_TIMEOUT_MS).unref(),
    ),
  ])

/** Wait until the spans of `ids` have arrived (the SDK exports in batches), or give up after `ms`. */
async function spansOf(spans: SpanReceiver, tasks: WsTask[], waitMs: number) {
  const until = Date.now() + waitMs
  let steps = tasks.map((t) => stepsOf(t.id, t.sent, t.token!, spans.traces))
  while (steps.some((s) => typeof s === 'string') && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 250))
    steps = tasks.map((t) => stepsOf(t.id, t.sent, t.token!, spans.traces))
  }
  return steps
}

async function engineRun(info: EngineInfo, spans: SpanReceiver): Promise<EngineResult> {
  const load0 = loadavg()[0]!
  const server = await startStandalone({
    engine: info.engine,
    socketPath: info.socketPath,
    image: info.image,
    env: {
      // Limits on callers, not speed settings: a benchmark's burst must not be refused.
      BERTH_RATE_RPM: '1000000',
      BERTH_RATE_BURST: '100000',
      BERTH_CONCURRENCY: String(CONCURRENCY),
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: spans.tracesUrl,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '500',
      ...SERVER_ENV,
    },
  })
  try {
    const call = apiCaller(server.url)
    const user = await call<{ key: { token: string } }>('POST', '/admin/users', server.adminToken, { name: 'bench' })
    const token = user.key.token
    const key = await call<{ id: string }>('POST', '/v1/api-keys', token, { name: 'offline', provider: 'stub' })
    const profile = (n: number) =>
      call<{ id: string }>('POST', '/v1/profiles', token, { name: `TTFT ${n}`, slug: `ttft-${n}`, api_key_id: key.id })
    const caller = await connectWsCaller(server.url, token)
    const run = async (profileId: string) => {
      const t = await withTimeout(caller.run({ mode: 'batch', profile_id: profileId, prompt: PROMPT }), 'a task')
      if (t.status !== 'completed' || t.token === undefined)
        throw new Error(`task ${t.id} ended ${t.status} without a token: ${JSON.stringify(t.error)}`)
      return t
    }
    const cold: number[] = []
    const profiles: string[] = []
    for (let i = 0; i < Math.max(1, COLD); i++) {
      profiles.push((await profile(i)).id)
      const t = await run(profiles[i]!)
      cold.push(t.token! - t.sent)
    }
    const main = profiles[0]!
    for (let i = 0; i < WARMUP; i++) await run(main)
    const warm: WsTask[] = []
    const seqStart = epochNow()
    for (let i = 0; i < TASKS; i++) {
      if (GAP_MS > 0) await new Promise((r) => setTimeout(r, GAP_MS))
      warm.push(await run(main))
      if (process.stdout.isTTY) process.stdout.write(`\r  ${info.engine}: ${i + 1}/${TASKS}   `)
    }
    const cycleMs = (epochNow() - seqStart) / TASKS
    if (process.stdout.isTTY) process.stdout.write('\r')
    const split = await spansOf(spans, warm, 15_000)
    const unsplit: Record<string, number> = {}
    for (const s of split) if (typeof s === 'string') unsplit[s] = (unsplit[s] ?? 0) + 1
    const whole = split.filter((s) => typeof s !== 'string')
    const steps = Object.fromEntries(
      STEPS.map(([name]) => [name, summarize(whole.map((s) => s.steps[name]))]),
    ) as Record<StepName, Summary>
    const warmAgents = whole.filter((s) => s.warmAgent).length
    const agentsUp = whole.filter((s) => s.agentUp).length

    let throughput: EngineResult['throughput'] = null
    if (THROUGHPUT > 0) {
      const { docker } = connectEngine({ socketPath: info.socketPath })
      const watch = await watchCpu({ serverPid: server.child.pid!, engine: info.engine, docker, pool: server.pool })
      const callers = await Promise.all(Array.from({ length: CONCURRENCY }, () => connectWsCaller(server.url, token)))
      let next = 0
      let failed = 0
      const t0 = epochNow()
      await Promise.all(
        callers.map(async (c) => {
          while (next < THROUGHPUT) {
            next++
            const t = await withTimeout(c.run({ mode: 'batch', profile_id: main, prompt: PROMPT }), 'a task under load')
            if (t.status !== 'completed') failed++
          }
        }),
      )
      const wallMs = epochNow() - t0
      const cpu = await watch.stop()
      for (const c of callers) c.close()
      const per = (x: number) => x / THROUGHPUT
      throughput = {
        tasks: THROUGHPUT,
        failed,
        tasksPerMinute: ((THROUGHPUT - failed) / wallMs) * 60_000,
        cpu,
        cpuPerTaskMs: {
          berth: per(cpu.berthMs),
          engine: per(cpu.engineMs),
          agent: per(cpu.agentMs),
          total: per(cpu.berthMs + cpu.engineMs + cpu.agentMs),
        },
      }
    }
    caller.close()
    return {
      engine: info.engine,
      version: info.version,
      serverEnv: SERVER_ENV,
      cold,
      warm: summarize(warm.map((t) => t.token! - t.sent)),
      tail: summarize(warm.map((t) => t.end! - t.token!)),
      steps,
      warmAgents,
      agentsUp,
      cycleMs,
      unsplit,
      throughput,
      load: { start: load0, end: loadavg()[0]! },
    }
  } catch (err) {
    console.error(server.output().split('\n').slice(-30).join('\n'))
    throw err
  } finally {
    await server.stop()
  }
}

const verdict = (ok: boolean) => (ok ? 'PASS' : 'BELOW TARGET')

function report(results: EngineResult[]): void {
  console.log(
    `\n${table(
      [
        'engine',
        'load',
        'cold first task',
        'warm p50',
        'warm p95',
        'n',
        'warm agents (up)',
        `p50 < ${GOALS.warmP50}`,
        `p95 < ${GOALS.warmP95}`,
        `cold < ${GOALS.cold}`,
      ],
      results.map((r) => {
        const coldMax = Math.max(...r.cold)
        return [
          r.engine,
          `${r.load.start.toFixed(1)}→${r.load.end.toFixed(1)}`,
          r.cold.map((c) => ms(c)).join(' '),
          ms(r.warm.p50),
          ms(r.warm.p95),
          String(r.warm.n),
          `${r.warmAgents} (${r.agentsUp})`,
          verdict(r.warm.p50 < GOALS.warmP50),
          verdict(r.warm.p95 < GOALS.warmP95),
          verdict(coldMax < GOALS.cold),
        ]
      }),
    )}`,
  )
  console.log(
    `\nWhere the warm time goes, per step (p50 / p95 ms, budget on the p50; steps add up to the whole):\n${table(
      ['step', 'budget', ...results.flatMap((r) => [`${r.engine} p50`, 'p95', 'verdict'])],
      STEPS.map(([name]) => [
        name,
        ms(STEP_BUDGET[name]),
        ...results.flatMap((r) => [
          ms(r.steps[name].p50),
          ms(r.steps[name].p95),
          r.steps[name].p50 <= STEP_BUDGET[name] ? 'PASS' : 'OVER',
        ]),
      ]),
    )}`,
  )
  for (const r of results)
    if (Object.keys(r.unsplit).length)
      console.log(`  ${r.engine}: tasks without steps (missing span): ${JSON.stringify(r.unsplit)}`)
  const withThroughput = results.filter((r) => r.throughput)
  if (withThroughput.length)
    console.log(
      `\nThroughput at concurrency ${CONCURRENCY} (target ≥ ${GOALS.throughputRatio}× ${BASELINE_TASKS_PER_MINUTE}/min), CPU ms per task:\n${table(
        ['engine', 'tasks/min', 'failed', 'vs baseline', 'Berth', 'engine', 'agent', 'total', 'containers', 'verdict'],
        withThroughput.map((r) => {
          const t = r.throughput!
          return [
            r.engine,
            t.tasksPerMinute.toFixed(1),
            String(t.failed),
            `${(t.tasksPerMinute / BASELINE_TASKS_PER_MINUTE).toFixed(2)}×`,
            t.cpuPerTaskMs.berth!.toFixed(0),
            t.cpuPerTaskMs.engine!.toFixed(0),
            t.cpuPerTaskMs.agent!.toFixed(0),
            t.cpuPerTaskMs.total!.toFixed(0),
            String(t.cpu.containers),
            verdict(t.tasksPerMinute >= GOALS.throughputRatio * BASELINE_TASKS_PER_MINUTE),
          ]
        }),
      )}`,
    )
  // Each batch task needs its own agent started (Node, Claude Code) and container made: a
  // sequential caller faster than the machine can start them is CPU-bound, whatever the order.
  for (const r of withThroughput) {
    const demand = r.throughput!.cpuPerTaskMs.total! / r.cycleMs
    console.log(
      `  ${r.engine}: the sequential caller ended a task every ${r.cycleMs.toFixed(0)} ms (first token p50 ${r.warm.p50.toFixed(0)} ms, then ${r.tail.p50.toFixed(0)} ms to its end); at ${r.throughput!.cpuPerTaskMs.total!.toFixed(0)} CPU ms per task that asks ${demand.toFixed(2)} of ${cpus().length} cores (${demand >= cpus().length * 0.8 ? 'CPU-bound: refills compete with the next first token' : 'within the machine'})`,
    )
  }
}

/**
 * Run every engine, print the tables and write bench/results/ttft.json.
 *
 * @example
 * ```ts
 * await main()
 * ```
 */
export async function main(): Promise<unknown> {
  const spans = await startSpanReceiver()
  const results: EngineResult[] = []
  try {
    for (const info of ensureEngines(ENGINES)) {
      console.log(
        `\nTime to first token: ${info.engine} ${info.version}, standalone server${Object.keys(SERVER_ENV).length ? ` with ${env.BENCH_TTFT_SERVER_ENV}` : ' (default configuration)'}, ${COLD} cold + ${WARMUP} warm-up + ${TASKS} tasks (load average ${loadavg()[0]!.toFixed(1)}, ${cpus().length} cores)`,
      )
      results.push(await engineRun(info, spans))
    }
  } finally {
    await spans.close()
  }
  report(results)
  writeResults('ttft', {
    cpus: cpus().length,
    config: { TASKS, WARMUP, COLD, GAP_MS, THROUGHPUT, CONCURRENCY, PROMPT },
    goals: GOALS,
    stepBudget: STEP_BUDGET,
    results,
  })
  return results
}

runAsScript(import.meta.url, main)
