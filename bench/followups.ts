/**
 * Session follow-ups (issue 42): a session's follow-up first token (WebSocket submit → first
 * `token` event, as bench/ttft.ts times a task) with a pause between follow-ups and back
 * to back, the CPU per follow-up split between Berth, the engine and the containers
 * (bench/lib/cpu-split.ts), and the memory of idle sessions' containers (engine stats);
 * per engine, against the standalone server as users run it (default configuration, the
 * offline model). With BENCH_FOLLOWUP_BEFORE naming another built checkout, each round runs
 * that build and this one, the order alternating between rounds, so the machine's load
 * falls on both alike; every figure is reported per build as the median of the rounds
 * with their spread, and each run with its load averages.
 *
 *   node --import tsx bench/followups.ts                                        (this build)
 *   BENCH_FOLLOWUP_BEFORE=/path/to/other/checkout node --import tsx bench/followups.ts
 *
 * Knobs: BENCH_FOLLOWUP_ROUNDS (3), BENCH_FOLLOWUP_TASKS (20 per phase), BENCH_FOLLOWUP_WARMUP (2),
 * BENCH_FOLLOWUP_GAP_MS (2000), BENCH_FOLLOWUP_SESSIONS (3 idle sessions, 0: skip the memory part),
 * BENCH_FOLLOWUP_SAMPLES (3, 5 s apart), BENCH_FOLLOWUP_SETTLE_MS (10000), BENCH_FOLLOWUP_IDLE_MS (10000: the idle window), BENCH_FOLLOWUP_ENGINES (`docker`),
 * BENCH_FOLLOWUP_SERVER_ENV (extra server settings, `K=V` separated by spaces).
 */
import { cpus, loadavg } from 'node:os'
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ensureEngines, type EngineInfo } from '@berth/testkit'
import { measureBuild, type BuildRun, type FollowUpSettings, type Phase } from './lib/followup-run.js'
import { startSpanReceiver } from './lib/otlp-spans.js'
import { runAsScript, writeResults } from './lib/results.js'
import { table } from './lib/table.js'
import { STEPS } from './lib/ttft-steps.js'

const env = process.env
const ROOT = fileURLToPath(new URL('../', import.meta.url))
const ROUNDS = Number(env.BENCH_FOLLOWUP_ROUNDS ?? 3)
const ENGINES = (env.BENCH_FOLLOWUP_ENGINES ?? 'docker')
  .split(',')
  .map((x) => x.trim())
  .filter(Boolean) as EngineInfo['engine'][]
const BEFORE = env.BENCH_FOLLOWUP_BEFORE ? resolve(env.BENCH_FOLLOWUP_BEFORE) : null
const SETTINGS: FollowUpSettings = {
  tasks: Number(env.BENCH_FOLLOWUP_TASKS ?? 20),
  warmup: Number(env.BENCH_FOLLOWUP_WARMUP ?? 2),
  gapMs: Number(env.BENCH_FOLLOWUP_GAP_MS ?? 2000),
  sessions: Number(env.BENCH_FOLLOWUP_SESSIONS ?? 3),
  samples: Number(env.BENCH_FOLLOWUP_SAMPLES ?? 3),
  sampleEveryMs: 5000,
  settleMs: Number(env.BENCH_FOLLOWUP_SETTLE_MS ?? 10_000),
  idleMs: Number(env.BENCH_FOLLOWUP_IDLE_MS ?? 10_000),
  serverEnv: Object.fromEntries(
    (env.BENCH_FOLLOWUP_SERVER_ENV ?? '')
      .split(/\s+/)
      .filter((kv) => kv.includes('='))
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  ),
}

/** Goals (issue 42): follow-up first token p50 with 2 s gaps, and CPU per follow-up against the build before. */
export const GOALS = { gapP50Ms: 150, cpuRatio: 0.5 }

const median = (xs: number[]) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b)
  const n = s.length
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2
}
/** `median (min–max)` of one figure across rounds. */
const spread = (xs: number[], digits = 0) => {
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a')
  const ok = xs.filter(Number.isFinite)
  return ok.length ? `${f(median(ok))} (${f(Math.min(...ok))}–${f(Math.max(...ok))})` : 'n/a'
}
const loads = (l: number[]) => l.map((x) => x.toFixed(2)).join(' ')
/**
 * CPU per follow-up without the engine's daemons: dockerd and containerd serve every client
 * of the engine, so on a shared machine others' containers land in the engine column.
 */
const ownCpu = (p: Phase) => p.cpuPerFollowUpMs.berth + p.cpuPerFollowUpMs.agent

function report(runs: BuildRun[]): void {
  const builds = [...new Set(runs.map((r) => r.build))]
  for (const engine of ENGINES) {
    const of = (build: string) => runs.filter((r) => r.engine === engine && r.build === build)
    console.log(`\nEach run (${engine}), load averages (1, 5, 15 min) at its start → end:`)
    console.log(
      table(
        [
          'build',
          'load',
          'gap p50',
          'p95',
          'b2b p50',
          'p95',
          'living (gap/b2b)',
          'CPU/follow-up gap',
          'b2b',
          'idle CPU/s',
          'containers started (gap/b2b/idle)',
        ],
        runs
          .filter((r) => r.engine === engine)
          .map((r) => [
            r.build,
            `${loads(r.load.start)} → ${loads(r.load.end)}`,
            r.gap.firstToken.p50.toFixed(0),
            r.gap.firstToken.p95.toFixed(0),
            r.backToBack.firstToken.p50.toFixed(0),
            r.backToBack.firstToken.p95.toFixed(0),
            `${r.gap.inLivingAgent}/${r.backToBack.inLivingAgent} of ${r.gap.firstToken.n}`,
            r.gap.cpuPerFollowUpMs.total.toFixed(0),
            r.backToBack.cpuPerFollowUpMs.total.toFixed(0),
            r.idle.perSecondMs.total.toFixed(0),
            `${r.gap.cpu.started}/${r.backToBack.cpu.started}/${r.idle.cpu.started}`,
          ]),
      ),
    )
    const phaseRows = (name: string, pick: (r: BuildRun) => Phase) => {
      const cells = (f: (p: Phase) => number) => builds.map((b) => spread(of(b).map((r) => f(pick(r)))))
      return [
        [`${name}: first token p50 (ms)`, ...cells((p) => p.firstToken.p50)],
        [`${name}: first token p95 (ms)`, ...cells((p) => p.firstToken.p95)],
        [`${name}: rest of the follow-up p50 (ms)`, ...cells((p) => p.tail.p50)],
        [`${name}: CPU per follow-up, Berth (ms)`, ...cells((p) => p.cpuPerFollowUpMs.berth)],
        [`${name}: CPU per follow-up, engine (ms)`, ...cells((p) => p.cpuPerFollowUpMs.engine)],
        [`${name}: CPU per follow-up, containers (ms)`, ...cells((p) => p.cpuPerFollowUpMs.agent)],
        [`${name}: CPU per follow-up, total (ms)`, ...cells((p) => p.cpuPerFollowUpMs.total)],
        [`${name}: CPU per follow-up, Berth + containers (ms)`, ...cells(ownCpu)],
      ]
    }
    const memRows = builds.map((b) => {
      const ms = of(b).flatMap((r) => r.memory?.mib.flat() ?? [])
      const perRun = of(b).map((r) => median(r.memory?.mib.flat() ?? []))
      const counts = of(b).map((r) => (r.memory ? `${r.memory.withAgent}/${r.memory.warm}` : '-'))
      const pids = of(b).flatMap((r) => r.memory?.pids ?? [])
      const cpu = of(b).flatMap((r) => r.memory?.cpuMsPerSecond ?? [])
      return `${b}: ${spread(perRun, 1)} MiB per idle session (median of each run's ${ms.length / Math.max(1, of(b).length)} samples; all samples ${spread(ms, 1)}); living agents / warm sessions per run: ${counts.join(', ')}; processes per container ${spread(pids)}; CPU while idle ${spread(cpu, 1)} ms/s per session`
    })
    console.log(
      `\nSession follow-ups on ${engine}: median of ${ROUNDS} rounds (min–max), ${SETTINGS.tasks} follow-ups per phase:\n${table(
        ['figure', ...builds],
        [
          ...phaseRows(`${SETTINGS.gapMs} ms gaps`, (r) => r.gap),
          ...phaseRows('back to back', (r) => r.backToBack),
          ...(['berth', 'engine', 'agent', 'total'] as const).map((k) => [
            `idle, CPU per second, ${k === 'agent' ? 'containers' : k === 'berth' ? 'Berth' : k} (ms)`,
            ...builds.map((b) => spread(of(b).map((r) => r.idle.perSecondMs[k]))),
          ]),
        ],
      )}`,
    )
    console.log(`\nIdle sessions' containers after one follow-up each (engine stats, page cache excluded):`)
    for (const line of memRows) console.log(`  ${line}`)
    console.log(
      `\nWhere a follow-up's first token goes, per step (p50 ms, median of rounds), ${SETTINGS.gapMs} ms gaps / back to back:`,
    )
    console.log(
      table(
        ['step', ...builds.flatMap((b) => [`${b} gap`, 'b2b'])],
        STEPS.map(([name]) => [
          name,
          ...builds.flatMap((b) => [
            median(of(b).map((r) => r.gap.steps[name].p50)).toFixed(1),
            median(of(b).map((r) => r.backToBack.steps[name].p50)).toFixed(1),
          ]),
        ]),
      ),
    )
    for (const r of runs.filter((x) => x.engine === engine))
      for (const [phase, p] of [
        ['gap', r.gap],
        ['back to back', r.backToBack],
      ] as const)
        if (Object.keys(p.unsplit).length)
          console.log(`  ${r.build} ${phase}: follow-ups without steps (missing span): ${JSON.stringify(p.unsplit)}`)
    const after = of('after')
    const gapP50 = median(after.map((r) => r.gap.firstToken.p50))
    console.log(
      `\n  goal: follow-up first token p50 < ${GOALS.gapP50Ms} ms with ${SETTINGS.gapMs} ms gaps: ${gapP50.toFixed(0)} ms, ${gapP50 < GOALS.gapP50Ms ? 'PASS' : 'BELOW TARGET'}`,
    )
    if (builds.includes('before'))
      for (const [name, pick] of [
        ['with gaps', (r: BuildRun) => r.gap],
        ['back to back', (r: BuildRun) => r.backToBack],
      ] as const) {
        const ratio =
          median(after.map((r) => pick(r).cpuPerFollowUpMs.total)) /
          median(of('before').map((r) => pick(r).cpuPerFollowUpMs.total))
        const own = median(after.map((r) => ownCpu(pick(r)))) / median(of('before').map((r) => ownCpu(pick(r))))
        console.log(
          `  goal: CPU per follow-up ${name} at most ${GOALS.cpuRatio}× before: ${ratio.toFixed(2)}× (Berth + containers ${own.toFixed(2)}×), ${ratio <= GOALS.cpuRatio ? 'PASS' : 'BELOW TARGET'}`,
        )
      }
  }
}

/**
 * Run every round (builds alternating), print the tables and write bench/results/followups.json.
 *
 * @example
 * ```ts
 * await main()
 * ```
 */
export async function main(): Promise<unknown> {
  const builds = BEFORE
    ? [
        { build: 'before', root: BEFORE },
        { build: 'after', root: ROOT },
      ]
    : [{ build: 'after', root: ROOT }]
  const spans = await startSpanReceiver()
  const runs: BuildRun[] = []
  try {
    for (const info of ensureEngines(ENGINES))
      for (let round = 0; round < ROUNDS; round++) {
        const order = round % 2 ? [...builds].reverse() : builds
        for (const b of order) {
          console.log(
            `\nSession follow-ups: ${info.engine} ${info.version}, round ${round + 1}/${ROUNDS}, ${b.build} (${b.root}), load average ${loadavg()
              .map((x) => x.toFixed(2))
              .join(' ')}, ${cpus().length} cores`,
          )
          runs.push(await measureBuild({ ...b, info, spans, settings: SETTINGS }))
        }
      }
  } finally {
    await spans.close()
  }
  report(runs)
  writeResults('followups', { cpus: cpus().length, config: { ROUNDS, BEFORE, SETTINGS }, goals: GOALS, runs })
  return runs
}

runAsScript(import.meta.url, main)
