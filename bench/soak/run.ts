/**
 * Berth's own chaos soak: a bounded mix of batch tasks, session follow-ups, cancels,
 * SIGKILLs of the server (restarted on the same data dir) and containers killed from
 * outside, against the standalone server as a child process on a real engine. Then the
 * checks the job systems we trust make to prove nothing was lost (see checks.ts).
 */
import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { dockerRuntime } from '@berth/adapter-docker'
import { podmanRuntime } from '@berth/adapter-podman'
import type { ContainerRuntime } from '@berth/core'
import { ensureEngines, findRepoRoot } from '@berth/testkit'
import { newCaller, TERMINAL, type Json } from './api.js'
import { checkLeftovers, checkLogs, checkTasks, type SoakTask } from './checks.js'
import { type AttackRow, startHostile } from './hostile.js'
import { pick, random } from './mix.js'
import { TaskObserver } from './observer.js'
import { startStandalone, tail, type Standalone } from './standalone.js'

export interface SoakConfig {
  engine: 'docker' | 'podman'
  /** Batch tasks to submit. */
  tasks: number
  /** Sessions to start; each gets `followUps` more prompts. */
  sessions: number
  followUps: number
  /** Tasks in flight at once. */
  concurrency: number
  /** Share of tasks cancelled at a random moment. */
  cancelRate: number
  /** SIGKILLs of the server, spread over the run, each followed by a restart. */
  serverKills: number
  /** Running task containers removed from outside (through the engine, not Berth). */
  containerKills: number
  poolMin: number
  poolMax: number
  seed: number
  /** With more than one, or with `redisKills`: the multi-instance soak on Postgres + Redis (cluster.ts). */
  instances: number
  /** SIGKILLs of Redis (restarted empty) in the multi-instance soak. */
  redisKills: number
  /** Rounds of the hostile mix (hostile.ts), started beside the normal one (its baseline taken under it); 0: none. */
  hostile: number
  log: (line: string) => void
}

export const DEFAULT_CONFIG: SoakConfig = {
  engine: 'docker',
  tasks: 120,
  sessions: 6,
  followUps: 2,
  concurrency: 6,
  cancelRate: 0.15,
  serverKills: 2,
  containerKills: 2,
  poolMin: 2,
  poolMax: 14,
  seed: 1,
  instances: 1,
  redisKills: 0,
  hostile: 0,
  log: (line) => console.log(line),
}

export interface SoakResult {
  figures: Record<string, number | string>
  violations: string[]
  /** The hostile mix's table (empty without it). */
  attacks?: AttackRow[]
}

/**
 * Run the soak and check it. Resolves with the figures and every violation found (none: pass).
 *
 * @example
 * ```ts
 * const { figures, violations } = await runSoak({ ...DEFAULT_CONFIG, tasks: 20, serverKills: 1 })
 * ```
 */
export async function runSoak(config: SoakConfig): Promise<SoakResult> {
  const cleanups: (() => Promise<unknown>)[] = []
  try {
    return await soak(config, (fn) => cleanups.push(fn))
  } finally {
    // Whatever happened, leave the machine as it was.
    for (const fn of cleanups.reverse()) await fn().catch(() => {})
  }
}

async function soak(config: SoakConfig, onCleanup: (fn: () => Promise<unknown>) => void): Promise<SoakResult> {
  const rand = random(config.seed)
  // Finds (or provisions) the engine and its local test image: nothing is pulled.
  const [info] = ensureEngines([config.engine])
  if (!info) throw new Error(`no ${config.engine} engine`)
  const outside: ContainerRuntime =
    config.engine === 'docker'
      ? dockerRuntime({ socketPath: info.socketPath })
      : podmanRuntime({ socketPath: info.socketPath })
  const pool = `soak-${process.pid}-${randomBytes(3).toString('hex')}`
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-soak-'))
  const adminToken = `soak-admin-${randomBytes(12).toString('hex')}`
  const env = {
    BERTH_DATA_DIR: dataDir,
    BERTH_ADMIN_TOKEN: adminToken,
    BERTH_RUNTIME: config.engine,
    BERTH_IMAGE: info.image,
    BERTH_POOL_MIN: String(config.poolMin),
    BERTH_POOL_MAX: String(config.poolMax),
    BERTH_POOL_NAME: pool,
    BERTH_CONCURRENCY: '100',
    BERTH_RATE_RPM: '1000000',
    BERTH_RATE_BURST: '100000',
    BERTH_CACHE_DIR: join(findRepoRoot(), '.tmp', 'berth-cache'),
  }
  const started = performance.now()
  const runs: Standalone[] = []
  const restartMs: number[] = []
  const rss: number[] = []
  onCleanup(async () => {
    // Workspace disks a SIGKILLed server left mounted (made, but its container never created) go with the dir.
    for (const mount of mountsUnder(dataDir)) spawnSync('umount', ['--lazy', mount])
    rmSync(dataDir, { recursive: true, force: true })
  })
  // Unlabelled volumes (a regression) are not found by label: they are removed by name.
  const volumeNames = new Set<string>()
  onCleanup(async () => {
    for (const c of await outside.list({ labels: { 'berth.pool': pool } })) await outside.remove(c.id)
    for (const v of await outside.listVolumes({ labels: { 'berth.pool': pool } })) volumeNames.add(v.name)
    for (const name of volumeNames) await outside.removeVolume(name).catch(() => {})
    await outside.close?.()
  })
  // Every server run's output, kept for reading after a violation or a failure.
  const logDir = join(findRepoRoot(), '.tmp', 'soak', pool)
  onCleanup(async () => {
    mkdirSync(logDir, { recursive: true })
    for (const [i, run] of runs.entries())
      writeFileSync(join(logDir, `server-${i}.log`), run.lines.map((l) => `${l.stream}: ${l.text}`).join('\n'))
  })
  // A server that exits when the soak did not stop it fails the soak at once, with its last
  // lines, instead of leaving every worker polling a dead port.
  const stopping = new Set<Standalone>()
  let failDeath!: (err: Error) => void
  const death = new Promise<never>((_, reject) => (failDeath = reject))
  death.catch(() => {})
  const watch = (s: Standalone) => {
    void s.exited.then((exit) => {
      if (!stopping.has(s))
        failDeath(
          new Error(`the server exited on its own (${JSON.stringify(exit)}); logs in ${logDir}:\n${tail(s.lines)}`),
        )
    })
    return s
  }
  const whileAlive = <T>(p: Promise<T>): Promise<T> => Promise.race([p, death])
  let server = watch(await startStandalone(env))
  runs.push(server)
  onCleanup(async () => {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL')
  })
  const sampler = setInterval(() => {
    const v = server.rss()
    if (v) rss.push(v)
  }, 1000)
  onCleanup(async () => clearInterval(sampler))
  const { api, profileId } = await newCaller(server.url, adminToken)
  const sessionProfile = await api.call('POST', '/v1/profiles', {
    name: 'Soak sessions',
    slug: 'soak-sessions',
    api_key_id: (await api.call('GET', `/v1/profiles/${profileId}`)).body.api_key_id,
    default_tools: ['Bash'],
    persistent_sessions: true,
  })
  const hostile = config.hostile
    ? startHostile({ ...config, url: server.url, adminToken, dataDir, rounds: config.hostile }).then((h) => h.done)
    : null
  const observer = new TaskObserver()
  // Closing it ends every wait for a task, and `over` every call: a failed soak leaves no
  // worker running on.
  let over = false
  onCleanup(async () => {
    over = true
    observer.close()
  })
  await observer.connect(server.url, api.token)
  const tasks: SoakTask[] = []
  let up: Promise<void> = Promise.resolve()
  let serverKills = 0
  let containerKills = 0
  let cancels = 0

  /** Kill the server hard, start it again on the same data dir, reconnect. */
  const crash = async () => {
    let resolveUp!: () => void
    up = new Promise((r) => (resolveUp = r))
    stopping.add(server)
    server.child.kill('SIGKILL')
    await server.exited
    serverKills++
    config.log(`soak: SIGKILL ${serverKills}/${config.serverKills} (${tasks.length} tasks submitted)`)
    const t0 = performance.now()
    server = watch(await startStandalone(env))
    restartMs.push(Math.round(performance.now() - t0))
    runs.push(server)
    api.url = server.url
    await observer.connect(server.url, api.token)
    resolveUp()
  }

  /** Remove a running task's container through the engine, behind Berth's back. */
  const killContainer = async () => {
    // Until a task is running in a container (for a while at most).
    for (let attempt = 0; attempt < 100; attempt++) {
      const running = (await call('GET', '/v1/tasks?status=running&limit=100')).body.tasks as Json[] | undefined
      for (const t of running ?? []) {
        const ws = (await call('GET', `/v1/workspaces/${t.workspace_id}`)).body
        if (!ws.container_id) continue
        const [c] = await outside.list({ labels: { 'berth.pool': pool, 'berth.container': ws.container_id as string } })
        if (!c) continue
        await outside.remove(c.id)
        containerKills++
        config.log(`soak: removed container of ${t.task_id} from outside`)
        return
      }
      await new Promise((r) => setTimeout(r, 100))
    }
  }

  /** Call until the server answers (it may be down for a restart): never a 5xx. */
  const call = async (method: string, path: string, json?: unknown) => {
    for (let i = 0; ; i++) {
      await up
      if (over) throw new Error('the soak is over')
      const r = await api.call(method, path, json)
      if (r.status !== 0 || i > 50) return r
      await new Promise((res) => setTimeout(res, 200))
    }
  }

  const isEnded = async (id: string) =>
    (TERMINAL as readonly string[]).includes((await call('GET', `/v1/tasks/${id}`)).body.status)

  const submit = async (kind: string, body: Json, profile: string): Promise<SoakTask | null> => {
    const r = await call('POST', '/v1/tasks', { mode: 'batch', profile_id: profile, ...body })
    if (r.status !== 202) {
      tasks.push({ id: null, kind, submitStatus: r.status, error: JSON.stringify(r.body) })
      return null
    }
    const task: SoakTask = { id: r.body.task_id as string, kind, submitStatus: 202, sessionId: r.body.session_id }
    tasks.push(task)
    observer.subscribe(task.id!)
    if (rand() < config.cancelRate) {
      const delay = Math.floor(rand() * 2500)
      task.cancelRequested = true
      setTimeout(() => {
        cancels++
        void call('POST', `/v1/tasks/${task.id}/cancel`).catch(() => {}) // the soak may be over
      }, delay)
    }
    await observer.ended(task.id!, () => isEnded(task.id!))
    // Older servers answer a new session's submit without its id: the task has it.
    task.sessionId ??= (await call('GET', `/v1/tasks/${task.id}`)).body.session_id as string | null
    return task
  }

  // Chaos happens at fixed points of the submission order (spread over the run).
  const total = config.tasks + config.sessions * (1 + config.followUps)
  const killAt = new Set(
    Array.from({ length: config.serverKills }, (_, i) => Math.floor(((i + 1) * total) / (config.serverKills + 1))),
  )
  const containerKillAt = new Set(
    Array.from({ length: config.containerKills }, (_, i) =>
      Math.floor(((i + 0.5) * total) / (config.containerKills + 1)),
    ),
  )
  let submitted = 0
  const kills: Promise<void>[] = []
  const chaos = async () => {
    submitted++
    if (containerKillAt.has(submitted)) kills.push(killContainer())
    if (killAt.has(submitted)) await crash()
  }

  // Work items: batch tasks, and sessions (a chain of prompts, each after the last ended).
  const work: (() => Promise<void>)[] = []
  for (let i = 0; i < config.tasks; i++) {
    const k = pick(rand)
    work.push(async () => {
      await chaos()
      await submit(k.kind, { ...k.body }, profileId)
    })
  }
  const sessionIds: string[] = []
  const sessionWorkspaces = new Set<string>()
  for (let s = 0; s < config.sessions; s++) {
    work.splice(Math.floor(rand() * work.length), 0, async () => {
      await chaos()
      const first = await submit(
        'session',
        {
          mode: 'session',
          prompt: `Session ${s} [[berth:tool Bash {"command":"echo ${s} > note.txt"}]] [[berth:text started]]`,
        },
        sessionProfile.body.id as string,
      )
      const sessionId = first?.sessionId
      if (!sessionId || !first?.id) return
      sessionIds.push(sessionId)
      const ws = (await call('GET', `/v1/tasks/${first.id}`)).body.workspace_id as string
      sessionWorkspaces.add(ws)
      volumeNames.add(`berth-${ws.replace('_', '-')}`)
      for (let f = 0; f < config.followUps; f++) {
        await chaos()
        await submit(
          'follow-up',
          { mode: 'session', session_id: sessionId, prompt: `Again [[berth:turns 1]] [[berth:text follow-up ${f}]]` },
          sessionProfile.body.id as string,
        )
      }
    })
  }
  const queue = [...work]
  await whileAlive(
    Promise.all(
      Array.from({ length: config.concurrency }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) await next()
      }),
    ),
  )
  await whileAlive(Promise.all(kills))
  const attacks = hostile ? await whileAlive(hostile) : { rows: [] as AttackRow[], figures: {} }
  const submittedMs = Math.round(performance.now() - started)

  const result = await whileAlive(checkTasks({ api, call, observer, tasks, log: config.log }))
  // Half the sessions end for good (their container and volume must go); the rest stay warm.
  const warm = new Set<string>()
  let i = 0
  for (const ws of sessionWorkspaces) {
    if (i++ % 2 === 0) {
      const del = await call('DELETE', `/v1/workspaces/${ws}`)
      if (del.status !== 204)
        result.violations.push(`deleting workspace ${ws}: ${del.status} ${JSON.stringify(del.body)}`)
    } else if ((await call('GET', `/v1/workspaces/${ws}`)).body.status === 'running') warm.add(ws)
  }
  // A clean stop at the end: it must exit 0 promptly, and leave only warm sessions behind.
  stopping.add(server)
  server.child.kill('SIGTERM')
  const exit = await Promise.race([
    server.exited,
    new Promise((r) => setTimeout(() => r('did not exit within 20 s'), 20_000)),
  ])
  clearInterval(sampler)
  observer.close()
  const require = createRequire(new URL('../../packages/adapter-docker/package.json', import.meta.url))
  const Docker = require('dockerode') as new (o: {
    socketPath: string
  }) => {
    getVolume(n: string): { inspect(): Promise<{ Labels: Record<string, string> | null }> }
  }
  const engine = new Docker({ socketPath: info.socketPath })
  const afterStop = await checkLeftovers({
    outside,
    pool,
    poolMin: config.poolMin,
    warmWorkspaces: warm,
    persistentWorkspaces: sessionWorkspaces,
    volumeExists: (name) =>
      engine
        .getVolume(name)
        .inspect()
        .then((v) => ({ labels: v.Labels ?? {} }))
        .catch(() => null),
  })
  const violations = [
    ...result.violations,
    ...afterStop.violations,
    ...attacks.rows.filter((r) => !r.ok).map((r) => `hostile: ${r.attack}: expected ${r.expected}, got ${r.got}`),
  ]
  if (JSON.stringify(exit) !== JSON.stringify({ code: 0, signal: null }))
    violations.push(`SIGTERM at the end: ${JSON.stringify(exit)}`)
  violations.push(...checkLogs(runs))
  config.log(`soak: server logs in ${logDir}`)

  const figures: Record<string, number | string> = {
    engine: config.engine,
    seed: config.seed,
    duration_s: Math.round((performance.now() - started) / 100) / 10,
    submitting_s: Math.round(submittedMs / 100) / 10,
    ...result.figures,
    sessions_deleted: sessionWorkspaces.size - warm.size,
    ...afterStop.figures,
    cancels_requested: cancels,
    server_sigkills: serverKills,
    restart_ms: restartMs.join(' ') || '-',
    containers_killed_outside: containerKills,
    rss_mb_min: rss.length ? Math.round(Math.min(...rss) / 1048576) : '-',
    rss_mb_max: rss.length ? Math.round(Math.max(...rss) / 1048576) : '-',
    ...attacks.figures,
    violations: violations.length,
  }
  return { figures, violations, attacks: attacks.rows }
}

/** Mount points below `dir` (from this process's mountinfo; octal escapes such as `\040` decoded). */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) =>
      (line.split(' ')[4] ?? '').replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))),
    )
    .filter((mount) => mount.startsWith(`${dir}/`))
}
