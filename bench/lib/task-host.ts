/**
 * The server side of the tasks benchmark (bench/tasks.ts), run as its own child process
 * (forked with `forkTs`, so it loads the built packages): a real Berth on node:http
 * (127.0.0.1, WebSocket upgrade wired) with a container engine, a warm pool and the runner
 * bundle, seeded through its own API with a caller, a `stub` model key and a profile; a
 * {@link createProbe} probe records when each step of each task happened. It also runs
 * the direct baseline: the runner exec'd through the same adapter in a container claimed
 * from the same pool, with the exact stdin Berth sent for an earlier task.
 *
 * Messages in: a {@link TaskHostConfig}, then `settle`, `direct`, `traces`, `clock`, `close`.
 * Messages out: `ready`, `settled`, `direct-done`, `traces`, `clock`, `closed`, or `error`.
 */
import { apiCaller } from './api.js'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type * as DockerAdapter from '@berth/adapter-docker'
import type * as PodmanAdapter from '@berth/adapter-podman'
import type { ContainerRuntime } from '@berth/core'
import type { Berth } from '@berth/server'
import { wallNow } from './stats.js'
import { createProbe, type ExecTrace, type Probe, type StoreUse, type TaskTrace } from './task-probe.js'
import { loadBuiltPackage, loadPackageFile, loadWorkspace } from './workspace.js'

export interface TaskHostConfig {
  kind: 'tasks'
  engine: 'docker' | 'podman'
  socketPath: string
  image: string
  /** The runner bundle on the host, mounted read-only at /opt/berth-runner. */
  bundleDir: string
  /** `fs`: Berth's default store (unstorage fs driver, cached reads) in a temp dir; `memory`: unstorage memory. */
  storage: 'fs' | 'memory'
  pool: { name: string; min: number; max: number; labels: Record<string, string> }
  /** Running workspaces per profile. */
  concurrency: number
  /**
   * Records of another owner written to the store before the server starts (a third each
   * of tasks, workspaces and event-log chunks): a store that already served many tasks.
   */
  preloadKeys: number
  /** Warm agents kept (the pool's `warmAgents`; 0: every task starts its runner cold). */
  warmAgents?: number
}

export interface TaskHostReady {
  type: 'ready'
  port: number
  token: string
  profileId: string
  serverDir: string
}

export interface DirectDone {
  type: 'direct-done'
  trace: ExecTrace
  stderrTail: string
}

/** Storage calls of one task, per window of its life. */
export interface TaskStoreUse {
  /** `POST /v1/tasks` arrived → `queued` published. */
  submit: StoreUse
  /** `queued` → runner exec called (claim, statuses, workspace, materialize). */
  beforeExec: StoreUse
  /** Runner exec called → its exit (event log appends and flushes while it runs). */
  duringRun: StoreUse
  /** Runner exit → `completed` published. */
  finish: StoreUse
}

export interface Traces {
  type: 'traces'
  tasks: Record<string, TaskTrace & { store: TaskStoreUse }>
  /** Keys in the store now (what one unstorage fs `getKeys` walks). */
  storeKeys: number
}

const ADMIN_TOKEN = 'bench-operator-token-0123456789abcdef'

async function runtimeFor(cfg: TaskHostConfig): Promise<ContainerRuntime> {
  if (cfg.engine === 'podman') {
    const { podmanRuntime } = await loadBuiltPackage<typeof PodmanAdapter>('@berth/adapter-podman')
    return podmanRuntime({ socketPath: cfg.socketPath })
  }
  const { dockerRuntime } = await loadBuiltPackage<typeof DockerAdapter>('@berth/adapter-docker')
  return dockerRuntime({ socketPath: cfg.socketPath })
}

interface Host {
  ready: TaskHostReady
  settle(): Promise<number>
  direct(id: string): Promise<DirectDone>
  traces(ids: string[]): Promise<Traces>
  close(): Promise<void>
}

async function startHost(cfg: TaskHostConfig): Promise<Host> {
  const ws = await loadWorkspace()
  const probe: Probe = createProbe(await runtimeFor(cfg))
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-bench-tasks-'))
  // The storage Berth builds by default (fs driver under <dataDir>/store, cached reads), built
  // here so the probe can time every call.
  const { default: fsDriver } = await loadPackageFile<{ default: (o: { base: string }) => never }>(
    'unstorage',
    'drivers/fs.mjs',
  )
  const storage = probe.wrapStorage(
    cfg.storage === 'memory'
      ? ws.unstorage.createStorage()
      : ws.unstorage.createStorage({ driver: fsDriver({ base: join(dataDir, 'store') }) }),
  )
  for (let i = 0; i < cfg.preloadKeys; i += 300) {
    const batch = Array.from({ length: Math.min(300, cfg.preloadKeys - i) }, (_, k) => {
      const n = i + k
      const kind = n % 3 === 0 ? 'tasks' : n % 3 === 1 ? 'workspaces' : 'eventlog'
      const key =
        kind === 'eventlog'
          ? `eventlog:usr_filler:ws_${n}:00000000`
          : `${kind}:usr_filler:${kind === 'tasks' ? 'task' : 'ws'}_${n}`
      return storage.setItem(
        key,
        kind === 'eventlog' ? [{ seq: 1, type: 'token', text: 'x' }] : { id: String(n), owner_id: 'usr_filler' },
      )
    })
    await Promise.all(batch)
  }
  const berth: Berth = ws.server.createBerth({
    storage,
    cacheReads: cfg.storage === 'fs',
    dataDir,
    adminToken: ADMIN_TOKEN,
    rateLimit: { rpm: 1_000_000, burst: 1_000_000 },
    logger: ws.core.silentLogger,
    runtime: probe.runtime,
    runner: { bundleDir: cfg.bundleDir },
    concurrency: cfg.concurrency,
    pool: {
      image: cfg.image,
      min: cfg.pool.min,
      max: cfg.pool.max,
      name: cfg.pool.name,
      spec: { network: 'none', labels: cfg.pool.labels },
      ...(cfg.warmAgents && { warmAgents: cfg.warmAgents }),
    },
  })
  const pool = berth.pool!
  probe.attach(pool, berth.services.bus)
  const server: Server = createServer(probe.wrapHandler(berth.handler))
  server.on('upgrade', berth.handleUpgrade)
  try {
    await berth.ready
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, '127.0.0.1', resolve)
    })
  } catch (err) {
    await berth.close({ removeContainers: true }).catch(() => {})
    throw err
  }
  const port = (server.address() as AddressInfo).port
  const call = apiCaller(`http://127.0.0.1:${port}`)
  const created = await call<{ key: { token: string } }>('POST', '/admin/users', ADMIN_TOKEN, { name: 'Bench tasks' })
  const token = created.key.token
  const key = await call<{ id: string }>('POST', '/v1/api-keys', token, { name: 'offline', provider: 'stub' })
  const profile = await call<{ id: string }>('POST', '/v1/profiles', token, {
    name: 'Bench agent',
    slug: 'bench-agent',
    api_key_id: key.id,
    default_tools: ['Bash'],
  })

  /** Until the pool is back at `min` idle with nothing in use: the state a submit meets on a quiet server. */
  const settle = async (): Promise<number> => {
    const t0 = performance.now()
    const end = t0 + 60_000
    for (;;) {
      const s = pool.stats()
      // With warm agents: nothing serving a workspace, and an agent parked (in use, no workspace).
      const list = cfg.warmAgents ? pool.list() : []
      const serving = cfg.warmAgents ? list.filter((c) => c.state === 'in_use' && c.workspace_id).length : s.in_use
      const parked = berth.warmAgents?.stats().ready ?? 0
      if (serving === 0 && s.idle >= cfg.pool.min && parked >= (cfg.warmAgents ? 1 : 0)) return performance.now() - t0
      if (performance.now() > end) throw new Error(`pool did not settle: ${JSON.stringify(s)}`)
      await new Promise((r) => setTimeout(r, 10))
    }
  }

  return {
    ready: { type: 'ready', port, token, profileId: profile.id, serverDir: ws.serverDir },
    settle,
    async direct(id) {
      const call = probe.firstCall
      if (!call) throw new Error('no runner exec seen yet: run a task through Berth before the direct baseline')
      const input = { ...call.input, task_id: id, events_file: call.input.events_file.replace(call.input.task_id, id) }
      const lease = await pool.claim({ owner_id: 'usr_benchdirect', purpose: 'batch' })
      let stderr = ''
      try {
        const proc = await probe.runtime.exec(lease.container.engine_id, {
          cmd: call.cmd,
          ...(call.cwd !== undefined && { cwd: call.cwd }),
          stdin: `${JSON.stringify(input)}\n`,
          onStdout: () => {},
          onStderr: (c) => (stderr = (stderr + Buffer.from(c).toString('utf8')).slice(-2000)),
        })
        await proc.exit
      } finally {
        await lease.release()
      }
      const trace = probe.execs.get(id)!
      return { type: 'direct-done', trace, stderrTail: stderr }
    },
    async traces(ids) {
      const tasks: Traces['tasks'] = {}
      for (const id of ids) {
        const t = probe.tasks.get(id) ?? { status: {} }
        const e = t.exec
        tasks[id] = {
          ...t,
          store: {
            submit: probe.storeUse(t.arrival, t.status.queued),
            beforeExec: probe.storeUse(t.status.queued, e?.called),
            duringRun: probe.storeUse(e?.called, e?.exit),
            finish: probe.storeUse(e?.exit, t.status.completed),
          },
        }
      }
      return { type: 'traces', tasks, storeKeys: (await storage.getKeys('')).length }
    },
    async close() {
      server.closeAllConnections()
      await berth.close({ removeContainers: true })
      await new Promise<void>((r) => server.close(() => r()))
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

// Child-process entry.
if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  const send = (msg: unknown) => new Promise<void>((r) => process.send!(msg, () => r()))
  let host: Host | undefined
  process.on('message', (msg: TaskHostConfig | { type: string; id?: string; ids?: string[] }) => {
    void (async () => {
      if ('kind' in msg) {
        host = await startHost(msg)
        await send(host.ready)
      } else if (msg.type === 'clock') {
        await send({ type: 'clock', now: wallNow() })
      } else if (msg.type === 'settle') {
        await send({ type: 'settled', ms: await host!.settle() })
      } else if (msg.type === 'direct') {
        await send(await host!.direct(msg.id!))
      } else if (msg.type === 'traces') {
        await send(await host!.traces(msg.ids ?? []))
      } else if (msg.type === 'close') {
        await host?.close()
        await send({ type: 'closed' })
        process.exit(0)
      }
    })().catch(async (err: unknown) => {
      await send({ type: 'error', error: String((err as Error)?.stack ?? err) })
    })
  })
}
