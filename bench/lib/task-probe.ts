/**
 * Timestamps from inside a Berth server process, without touching its sources: a proxy
 * around the container runtime (when the runner is exec'd, attached, writes its first
 * `token` and its `result` line, exits), a wrapper around the pool's `claim`, one around
 * the event bus's `publish` (each status change and event as the server announces it),
 * and one around the node:http handler (when `POST /v1/tasks` arrives and its 202 leaves).
 * Every time is {@link wallNow}: milliseconds, comparable with the client's process.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ContainerPool, ContainerRuntime, EventBus, ExecOptions, ExecProcess, TaskBusMessage } from '@berth/core'
import { wallNow } from './stats.js'

/** One exec of the runner, as the server saw its output arrive. */
export interface ExecTrace {
  taskId: string
  /** `runtime.exec` called. */
  called: number
  /** `runtime.exec` resolved: the exec is created, attached and started. */
  attached?: number
  /** The chunk holding the first `token` line arrived. */
  tokenLine?: number
  /** The chunk holding the `result` line arrived. */
  resultLine?: number
  /** `exit` resolved: the process ended and its output was delivered. */
  exit?: number
  exitCode?: number | null
  /** The runner's own start-up steps (BERTH_RUNNER_PROBE), wall clock: node, imports, input, model, spawn, init, request, token, result. */
  runner?: Record<string, number>
}

/** One task, from the server's side. */
export interface TaskTrace {
  /** `POST /v1/tasks` reached the node:http handler. */
  arrival?: number
  /** Its 202 was handed to the socket. */
  responded?: number
  workspaceId?: string
  claimCalled?: number
  claimed?: number
  /** First time each status was published on the bus (`queued`, `starting`, ...). */
  status: Record<string, number>
  tokenPublished?: number
  resultPublished?: number
  exec?: ExecTrace
}

/** One storage call (unstorage) the server made. */
export interface StoreOp {
  op: string
  start: number
  end: number
}

/** Storage calls inside one window of a task: how many of each, and their summed time (ms; calls may overlap). */
export interface StoreUse {
  calls: Record<string, number>
  ms: Record<string, number>
}

/** The command line Berth execs the runner with, and the exact stdin it sent. */
export interface RunnerCall {
  cmd: string[]
  cwd: string | undefined
  input: Record<string, unknown> & { task_id: string; events_file: string }
}

/** The probe's records, filled as the server works. */
export interface Probe {
  tasks: Map<string, TaskTrace>
  execs: Map<string, ExecTrace>
  /** Every storage call, in order (bounded). */
  storeOps: StoreOp[]
  /** The first runner exec seen: the direct baseline replays its input. */
  firstCall: RunnerCall | null
  runtime: ContainerRuntime
  /** Wrap the node:http handler (request arrival and response times of `POST /v1/tasks`). */
  wrapHandler(
    handler: (req: IncomingMessage, res: ServerResponse) => unknown,
  ): (req: IncomingMessage, res: ServerResponse) => unknown
  /** Wrap a pool's `claim` and a bus's `publish` (once the server exists). */
  attach(pool: ContainerPool, bus: EventBus): void
  /** Wrap an unstorage instance: every read, write, removal and key listing is timed. */
  wrapStorage<S extends object>(storage: S): S
  /** The storage calls that started within `[from, to)`, per kind. */
  storeUse(from: number | undefined, to: number | undefined): StoreUse
}

const STORE_METHODS = new Set(['getItem', 'getItems', 'setItem', 'setItems', 'removeItem', 'getKeys', 'hasItem'])
const MAX_STORE_OPS = 500_000

function isRunner(cmd: string[]): boolean {
  return cmd.some((a) => a.endsWith('/main.js') || a === 'berth-runner')
}

/**
 * A probe around `inner`: pass `probe.runtime` to `createBerth`, `probe.wrapHandler(berth.handler)`
 * to node:http, then `probe.attach(berth.pool, berth.services.bus)`.
 *
 * @example
 * ```ts
 * const probe = createProbe(podmanRuntime({ socketPath }))
 * const berth = createBerth({ runtime: probe.runtime, ... })
 * probe.attach(berth.pool!, berth.services.bus)
 * createServer(probe.wrapHandler(berth.handler))
 * ```
 */
export function createProbe(inner: ContainerRuntime): Probe {
  const tasks = new Map<string, TaskTrace>()
  const execs = new Map<string, ExecTrace>()
  const byWorkspace = new Map<string, string>()
  const submits = new AsyncLocalStorage<{ arrival: number; taskId?: string; responded?: number }>()
  const task = (id: string) => {
    let t = tasks.get(id)
    if (!t) {
      t = { status: {} }
      tasks.set(id, t)
    }
    return t
  }

  const storeOps: StoreOp[] = []
  const probe: Probe = {
    tasks,
    execs,
    storeOps,
    firstCall: null,
    wrapStorage(storage) {
      return new Proxy(storage, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver) as unknown
          if (typeof value !== 'function') return value
          const fn = (value as (...a: unknown[]) => unknown).bind(target)
          if (typeof prop !== 'string' || !STORE_METHODS.has(prop)) return fn
          return async (...args: unknown[]) => {
            const start = wallNow()
            try {
              return await fn(...args)
            } finally {
              // Key listings are named by the collection they list (`getKeys(tools)`).
              const op = prop === 'getKeys' ? `getKeys(${String(args[0] ?? '').split(':')[0]})` : prop
              if (storeOps.length < MAX_STORE_OPS) storeOps.push({ op, start, end: wallNow() })
            }
          }
        },
      })
    },
    storeUse(from, to) {
      const use: StoreUse = { calls: {}, ms: {} }
      if (from === undefined || to === undefined) return use
      for (const o of storeOps) {
        if (o.start < from || o.start >= to) continue
        use.calls[o.op] = (use.calls[o.op] ?? 0) + 1
        use.ms[o.op] = (use.ms[o.op] ?? 0) + (o.end - o.start)
      }
      return use
    },
    runtime: new Proxy(inner, {
      get(target, prop, receiver) {
        if (prop === 'exec') return (id: string, o: ExecOptions) => tracedExec(target, id, o)
        const value = Reflect.get(target, prop, receiver) as unknown
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
      },
    }),
    wrapHandler(handler) {
      return (req, res) => {
        if (req.method !== 'POST' || req.url !== '/v1/tasks') return handler(req, res)
        const ctx: { arrival: number; taskId?: string } = { arrival: wallNow() }
        res.once('finish', () => {
          if (ctx.taskId) task(ctx.taskId).responded = wallNow()
        })
        return submits.run(ctx, () => handler(req, res))
      }
    },
    attach(pool, bus) {
      const claim = pool.claim.bind(pool)
      pool.claim = (req) => {
        const called = wallNow()
        const id = req.workspace_id && byWorkspace.get(req.workspace_id)
        const lease = claim(req)
        if (id) {
          task(id).claimCalled = called
          void lease.then(
            () => (task(id).claimed = wallNow()),
            () => {},
          )
        }
        return lease
      }
      const publish = bus.publish.bind(bus)
      bus.publish = (m: TaskBusMessage) => {
        const at = wallNow()
        const t = task(m.task_id)
        if (m.type === 'task.status') {
          t.status[m.status] ??= at
          if (m.status === 'queued') {
            const ctx = submits.getStore()
            if (ctx) {
              ctx.taskId = m.task_id
              t.arrival = ctx.arrival
            }
            if (m.task.workspace_id) {
              t.workspaceId = m.task.workspace_id
              byWorkspace.set(m.task.workspace_id, m.task_id)
            }
          }
        } else if (m.event.type === 'token') t.tokenPublished ??= at
        else if (m.event.type === 'result') t.resultPublished ??= at
        publish(m)
      }
    },
  }

  async function tracedExec(rt: ContainerRuntime, id: string, o: ExecOptions): Promise<ExecProcess> {
    const called = wallNow()
    if (!isRunner(o.cmd) || typeof o.stdin !== 'string') return rt.exec(id, o)
    const input = JSON.parse(o.stdin) as RunnerCall['input']
    const trace: ExecTrace = { taskId: input.task_id, called }
    execs.set(input.task_id, trace)
    const t = tasks.get(input.task_id)
    if (t) t.exec = trace
    probe.firstCall ??= { cmd: [...o.cmd], cwd: o.cwd, input }
    let pending = ''
    const decoder = new TextDecoder()
    const onStdout = (chunk: Uint8Array) => {
      const at = wallNow()
      pending += decoder.decode(chunk, { stream: true })
      for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
        const line = pending.slice(0, nl)
        pending = pending.slice(nl + 1)
        let type: unknown
        try {
          type = (JSON.parse(line) as { type?: unknown }).type
        } catch {
          continue
        }
        if (type === 'token') trace.tokenLine ??= at
        else if (type === 'result') trace.resultLine ??= at
      }
      o.onStdout?.(chunk)
    }
    // The runner's own probe: one stderr line per start-up step.
    let errPending = ''
    const onStderr = (chunk: Uint8Array) => {
      errPending += Buffer.from(chunk).toString('utf8')
      for (let nl = errPending.indexOf('\n'); nl >= 0; nl = errPending.indexOf('\n')) {
        const line = errPending.slice(0, nl)
        errPending = errPending.slice(nl + 1)
        if (!line.startsWith('{"probe"')) continue
        try {
          const p = JSON.parse(line) as { probe: string; t: number }
          trace.runner ??= {}
          trace.runner[p.probe] = p.t
        } catch {}
      }
      o.onStderr?.(chunk)
    }
    const proc = await rt.exec(id, { ...o, env: { ...o.env, BERTH_RUNNER_PROBE: '1' }, onStdout, onStderr })
    trace.attached = wallNow()
    void proc.exit.then(
      (r) => {
        trace.exit = wallNow()
        trace.exitCode = r.exitCode
      },
      () => (trace.exit = wallNow()),
    )
    return proc
  }

  return probe
}
