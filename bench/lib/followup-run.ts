/**
 * One build's session follow-ups on one engine, against the standalone server as users run
 * it (bench/lib/standalone.ts, default configuration, the offline model): a session's
 * follow-ups timed from the WebSocket submit to the first `token` event, with a pause
 * between them and back to back, each phase's CPU split per follow-up (bench/lib/cpu-split.ts)
 * and cut into steps from the server's spans (bench/lib/ttft-steps.ts); then the memory of
 * idle sessions' containers (engine stats) after one follow-up each.
 */
import { loadavg } from 'node:os'
import { connectEngine } from '@berth/adapter-docker'
import type { EngineInfo } from '@berth/testkit'
import { apiCaller } from './api.js'
import { watchCpu, type CpuSplit } from './cpu-split.js'
import type { SpanReceiver } from './otlp-spans.js'
import { startStandalone } from './standalone.js'
import { STEPS, stepsOf, type StepName } from './ttft-steps.js'
import { connectWsCaller, type WsCaller, type WsTask } from './ws-caller.js'

/** What a run measures (the knobs of bench/followups.ts). */
export interface FollowUpSettings {
  /** Follow-ups measured per phase. */
  tasks: number
  /** Unrecorded follow-ups after the session's first task. */
  warmup: number
  /** The pause between follow-ups of the first phase (ms). */
  gapMs: number
  /** Idle sessions whose containers' memory is sampled (besides none: 0 skips the part). */
  sessions: number
  /** Samples of each idle session's memory, `sampleEveryMs` apart. */
  samples: number
  sampleEveryMs: number
  /** The idle window after the phases whose CPU is measured (ms). */
  idleMs: number
  /** Wait after the last session's follow-up before the first memory sample (ms). */
  settleMs: number
  /** Extra server settings (`BENCH_FOLLOWUP_SERVER_ENV`). */
  serverEnv: Record<string, string>
}

/** p50 (median) and p95 (nearest rank) of a sample. */
export interface Summary {
  p50: number
  p95: number
  n: number
}

/** One phase (follow-ups with a pause, or back to back). */
export interface Phase {
  gapMs: number
  firstTokenMs: number[]
  firstToken: Summary
  /** From the first token to the task's end at the caller. */
  tail: Summary
  steps: Record<StepName, Summary>
  /** Follow-ups the server ran in an agent already up (`berth.runner.warm` on `task.runner`): a living agent. */
  inLivingAgent: number
  /** Follow-ups whose trace lacked a span (named). */
  unsplit: Record<string, number>
  /** CPU over the phase's window (its pauses included), and per follow-up. */
  cpu: CpuSplit
  cpuPerFollowUpMs: { berth: number; engine: number; agent: number; total: number }
  wallMs: number
}

/** Idle sessions' containers after one follow-up each. */
export interface IdleMemory {
  /** Per session: its MiB samples (usage less inactive page cache, as `docker stats` shows it). */
  mib: number[][]
  /** Sessions whose workspace said a living agent waits (`agent` not null) when sampled. */
  withAgent: number
  /** Sessions still `running` (container warm) when sampled: a released one is not sampled. */
  warm: number
  /** Processes in each container when last sampled (engine stats `pids`). */
  pids: number[]
  /** Per session: its container's CPU from the first sample to the last (engine stats), ms per second idle. */
  cpuMsPerSecond: number[]
}

/** One build's run on one engine. */
export interface BuildRun {
  build: string
  engine: string
  /** The 1, 5 and 15 minute load averages (as `uptime` prints them) at the start and end. */
  load: { start: number[]; end: number[] }
  gap: Phase
  backToBack: Phase
  /** CPU per second with the session idle (no task), over `idleMs` after the phases: what a pause costs. */
  idle: { ms: number; cpu: CpuSplit; perSecondMs: { berth: number; engine: number; agent: number; total: number } }
  /** The measured session's `agent` at the end (null before living agents, or when none lives). */
  agent: unknown
  memory: IdleMemory | null
}

const PROMPT = '[[berth:text ok]]'
const TASK_TIMEOUT_MS = 120_000
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Median and nearest-rank p95. */
export function summarize(xs: number[]): Summary {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b)
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

/** Submit one task and wait for its end; it must complete with a token. */
async function runTask(caller: WsCaller, task: Record<string, unknown>, what: string): Promise<WsTask> {
  const t = await withTimeout(caller.run({ ...task, prompt: PROMPT }), what)
  if (t.status !== 'completed' || t.token === undefined)
    throw new Error(`${what} ${t.id} ended ${t.status} without a token: ${JSON.stringify(t.error)}`)
  return t
}

/** Wait for the spans of `tasks` (exported in batches), at most `waitMs`. */
async function stepsFor(spans: SpanReceiver, tasks: WsTask[], waitMs: number) {
  const until = Date.now() + waitMs
  let steps = tasks.map((t) => stepsOf(t.id, t.sent, t.token!, spans.traces))
  while (steps.some((s) => typeof s === 'string') && Date.now() < until) {
    await sleep(250)
    steps = tasks.map((t) => stepsOf(t.id, t.sent, t.token!, spans.traces))
  }
  return steps
}

/**
 * Start `root`'s server on `info`'s engine, measure, stop it.
 *
 * @example
 * ```ts
 * const run = await measureBuild({ build: 'after', root: process.cwd(), info, spans, settings })
 * console.log(run.gap.firstToken.p50)
 * ```
 */
export async function measureBuild(o: {
  build: string
  root: string
  info: EngineInfo
  spans: SpanReceiver
  settings: FollowUpSettings
}): Promise<BuildRun> {
  const { info, spans, settings: s } = o
  const load0 = loadavg()
  const server = await startStandalone({
    root: o.root,
    engine: info.engine,
    socketPath: info.socketPath,
    image: info.image,
    env: {
      // Limits on callers, not speed settings: the benchmark's sessions must not be refused.
      BERTH_RATE_RPM: '1000000',
      BERTH_RATE_BURST: '100000',
      BERTH_CONCURRENCY: '8',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: spans.tracesUrl,
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '500',
      ...s.serverEnv,
    },
  })
  const { docker } = connectEngine({ socketPath: info.socketPath })
  try {
    const call = apiCaller(server.url)
    const user = await call<{ key: { token: string } }>('POST', '/admin/users', server.adminToken, { name: 'bench' })
    const token = user.key.token
    const key = await call<{ id: string }>('POST', '/v1/api-keys', token, { name: 'offline', provider: 'stub' })
    const profile = await call<{ id: string }>('POST', '/v1/profiles', token, {
      name: 'Follow-ups',
      slug: 'follow-ups',
      api_key_id: key.id,
    })
    const caller = await connectWsCaller(server.url, token)
    const first = await runTask(caller, { mode: 'session', profile_id: profile.id }, 'the session')
    const session = { mode: 'session', profile_id: profile.id, session_id: first.session_id }
    for (let i = 0; i < s.warmup; i++) await runTask(caller, session, 'a warm-up follow-up')
    // The first task's warm-agent refill and the pool's top-up settle before anything is measured.
    await sleep(3000)

    const phase = async (gapMs: number): Promise<Phase> => {
      const watch = await watchCpu({ serverPid: server.child.pid!, engine: info.engine, docker, pool: server.pool })
      const tasks: WsTask[] = []
      const t0 = Date.now()
      for (let i = 0; i < s.tasks; i++) {
        if (gapMs > 0) await sleep(gapMs)
        tasks.push(await runTask(caller, session, 'a follow-up'))
      }
      const wallMs = Date.now() - t0
      const cpu = await watch.stop()
      const split = await stepsFor(spans, tasks, 15_000)
      const unsplit: Record<string, number> = {}
      for (const x of split) if (typeof x === 'string') unsplit[x] = (unsplit[x] ?? 0) + 1
      const whole = split.filter((x) => typeof x !== 'string')
      const per = (x: number) => x / s.tasks
      return {
        gapMs,
        firstTokenMs: tasks.map((t) => t.token! - t.sent),
        firstToken: summarize(tasks.map((t) => t.token! - t.sent)),
        tail: summarize(tasks.map((t) => t.end! - t.token!)),
        steps: Object.fromEntries(STEPS.map(([name]) => [name, summarize(whole.map((x) => x.steps[name]))])) as Record<
          StepName,
          Summary
        >,
        inLivingAgent: whole.filter((x) => x.warmAgent).length,
        unsplit,
        cpu,
        cpuPerFollowUpMs: {
          berth: per(cpu.berthMs),
          engine: per(cpu.engineMs),
          agent: per(cpu.agentMs),
          total: per(cpu.berthMs + cpu.engineMs + cpu.agentMs),
        },
        wallMs,
      }
    }
    const gap = await phase(s.gapMs)
    const backToBack = await phase(0)
    const idleWatch = await watchCpu({ serverPid: server.child.pid!, engine: info.engine, docker, pool: server.pool })
    await sleep(s.idleMs)
    const quiet = await idleWatch.stop()
    const perSecond = (x: number) => (x / s.idleMs) * 1000
    const idle = {
      ms: s.idleMs,
      cpu: quiet,
      perSecondMs: {
        berth: perSecond(quiet.berthMs),
        engine: perSecond(quiet.engineMs),
        agent: perSecond(quiet.agentMs),
        total: perSecond(quiet.berthMs + quiet.engineMs + quiet.agentMs),
      },
    }
    const measured = await call<{ agent?: unknown }>('GET', `/v1/workspaces/${first.workspace_id}`, token)
    const memory = s.sessions > 0 ? await idleMemory(caller, call, token, profile.id, docker, s) : null
    caller.close()
    return {
      build: o.build,
      engine: info.engine,
      load: { start: load0, end: loadavg() },
      gap,
      backToBack,
      idle,
      agent: measured.agent ?? null,
      memory,
    }
  } catch (err) {
    console.error(server.output().split('\n').slice(-30).join('\n'))
    throw err
  } finally {
    await server.stop()
  }
}

type Call = ReturnType<typeof apiCaller>
type Docker = ReturnType<typeof connectEngine>['docker']
interface WorkspaceView {
  status: string
  container_id: string | null
  agent?: unknown
}

/** `settings.sessions` new sessions, one follow-up each, left idle; their containers' memory sampled. */
async function idleMemory(
  caller: WsCaller,
  call: Call,
  token: string,
  profileId: string,
  docker: Docker,
  s: FollowUpSettings,
): Promise<IdleMemory> {
  const workspaces: string[] = []
  for (let i = 0; i < s.sessions; i++) {
    const first = await runTask(caller, { mode: 'session', profile_id: profileId }, 'an idle session')
    await runTask(caller, { mode: 'session', profile_id: profileId, session_id: first.session_id }, 'its follow-up')
    workspaces.push(first.workspace_id!)
  }
  await sleep(s.settleMs)
  const mib: number[][] = workspaces.map(() => [])
  const pids: number[] = workspaces.map(() => 0)
  const cpu: { ns: number; at: number }[][] = workspaces.map(() => [])
  let withAgent = 0
  let warm = 0
  const engineIds: (string | null)[] = []
  for (const id of workspaces) {
    const ws = await call<WorkspaceView>('GET', `/v1/workspaces/${id}`, token)
    if (ws.agent) withAgent++
    if (ws.status !== 'running' || !ws.container_id) {
      engineIds.push(null)
      continue
    }
    warm++
    const found = await docker.listContainers({ filters: { label: [`berth.container=${ws.container_id}`] } })
    engineIds.push(found[0]?.Id ?? null)
  }
  for (let k = 0; k < s.samples; k++) {
    if (k > 0) await sleep(s.sampleEveryMs)
    await Promise.all(
      engineIds.map(async (id, i) => {
        if (!id) return
        const raw = (await docker.getContainer(id).stats({ stream: false })) as {
          memory_stats?: { usage?: number; stats?: Record<string, number> }
          pids_stats?: { current?: number }
          cpu_stats?: { cpu_usage?: { total_usage?: number } }
          read?: string
        }
        const ns = raw.cpu_stats?.cpu_usage?.total_usage
        if (ns !== undefined && raw.read) cpu[i]!.push({ ns, at: Date.parse(raw.read) })
        const usage = raw.memory_stats?.usage ?? 0
        const st = raw.memory_stats?.stats ?? {}
        const cache = st.total_inactive_file ?? st.inactive_file ?? 0
        mib[i]!.push((usage - (cache < usage ? cache : 0)) / 2 ** 20)
        pids[i] = raw.pids_stats?.current ?? 0
      }),
    )
  }
  const cpuMsPerSecond = cpu.map((xs) => {
    const a = xs[0]
    const b = xs.at(-1)
    return a && b && b.at > a.at ? (b.ns - a.ns) / 1e6 / ((b.at - a.at) / 1000) : NaN
  })
  return { mib, withAgent, warm, pids, cpuMsPerSecond }
}
