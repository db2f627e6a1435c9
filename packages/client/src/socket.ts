/** The reconnecting `/v1/ws` client: exactly-once submits by `request_id`, and subscriptions that survive a reconnect. */
import {
  ERROR_STATUS,
  type ClientMessage,
  type ServerMessage,
  type SubmittedMessage,
  type TaskEventMessage,
  type TaskStatusMessage,
} from '@berth/contract'
import { BerthError } from './errors.js'
import { frameText, globalConnect, socketUrl, type ConnectSocket, type WebSocketLike } from './socket-connect.js'

/** The submit body as a caller writes it (fields with defaults may be left out). */
export type SubmitTaskInput = Extract<ClientMessage, { type: 'submit' }>['task']

/** A message about one task: its status, or one of its transcript events. */
export type TaskMessage = TaskStatusMessage | TaskEventMessage

/** Options of {@link createBerthSocket}. */
export interface BerthSocketOptions {
  /** Where Berth answers, e.g. `http://127.0.0.1:3000`. */
  baseURL: string
  /** Caller key; a function is asked before every (re)connect. */
  token?: string | (() => string | undefined | Promise<string | undefined>)
  /** How to open a socket (default: the global `WebSocket`). */
  connect?: ConnectSocket
  /** Reconnect after a drop: consecutive failed attempts before giving up (default 5; `false`: never). */
  reconnect?: { retries?: number; delay?: number; maxDelay?: number } | false
}

/** The answer to a submit: the contract's `submitted` message without its `type`. */
export type SubmittedOverSocket = Omit<SubmittedMessage, 'type'>

export type SocketState = 'connecting' | 'open' | 'reconnecting' | 'closed'

/** A reconnecting `/v1/ws` client; see {@link createBerthSocket}. */
export interface BerthSocket {
  readonly state: SocketState
  /**
   * Submit a task. The `request_id` (random unless given) makes it exactly once: a submit
   * resent after a reconnect returns the first task, never a second one. The socket is
   * subscribed to the task; messages that arrive before you `subscribe` are kept for you.
   */
  submit(task: SubmitTaskInput, options?: { requestId?: string; signal?: AbortSignal }): Promise<SubmittedOverSocket>
  /**
   * Listen to a task's `task.status` and `task.event` messages. The server replays the
   * log first, then live; after a reconnect the socket subscribes again and drops events
   * this listener already had (by `seq`), so each arrives once. Returns the unsubscribe.
   */
  subscribe(taskId: string, listener: (message: TaskMessage) => void, options?: { after?: number }): () => void
  /** Every message the server sends, raw. */
  on(event: 'message', listener: (message: ServerMessage) => void): () => void
  /** `open` on every (re)connect, `close` on every drop. */
  on(event: 'open' | 'close', listener: () => void): () => void
  /** Reconnecting was given up (or `close()` was called); the socket is closed for good. */
  on(event: 'end', listener: (error: BerthError | undefined) => void): () => void
  /** Send a raw message (queued until the socket is open). */
  send(message: ClientMessage): void
  /** Resolves once the socket is open (at once when it is); rejects when it ends first. */
  opened(): Promise<void>
  /** Close for good: no reconnect; pending submits reject with `ABORTED`. */
  close(): void
}

function socketError(code: string, message: string, details?: Record<string, unknown>, url = ''): BerthError {
  const status = (ERROR_STATUS as Record<string, number>)[code] ?? 0
  return new BerthError(message, { status, code, details, route: 'ws', method: 'GET', url })
}

interface Pending {
  task: SubmitTaskInput
  resolve(value: SubmittedOverSocket): void
  reject(error: unknown): void
}

interface Listener {
  fn(message: TaskMessage): void
  lastSeq: number
}

interface Subscription {
  listeners: Set<Listener>
  /** Messages for a submitted task no one listens to yet. */
  backlog: TaskMessage[]
}

const BACKLOG_LIMIT = 10_000

/**
 * A small reconnecting client for Berth's WebSocket (`/v1/ws`): submit tasks exactly once
 * by `request_id`, and follow their status and events. It reconnects with backoff after a
 * drop, resends submits that were not answered (same `request_id`, so never a second
 * task) and subscribes again, dropping events a listener already had. Works on the global
 * `WebSocket` (browsers, Node 22+) or any `connect` (Node 20: `@berth/client/node`).
 *
 * @example
 * ```ts
 * const socket = createBerthSocket({ baseURL: 'http://127.0.0.1:3000', token })
 * const { task_id } = await socket.submit({ mode: 'batch', profile_id, prompt: 'Hello' })
 * socket.subscribe(task_id, (m) => {
 *   if (m.type === 'task.event' && m.event.type === 'token') process.stdout.write(m.event.text)
 *   if (m.type === 'task.status' && m.task.finished_at) socket.close()
 * })
 * ```
 */
export function createBerthSocket(options: BerthSocketOptions): BerthSocket {
  const url = socketUrl(options.baseURL)
  const connect = options.connect ?? globalConnect
  const reconnect =
    options.reconnect === false
      ? { retries: 0, delay: 0, maxDelay: 0 }
      : { retries: 5, delay: 200, maxDelay: 5_000, ...options.reconnect }
  const pending = new Map<string, Pending>()
  const subs = new Map<string, Subscription>()
  const outbox: string[] = []
  const handlers = {
    message: new Set<(m: ServerMessage) => void>(),
    open: new Set<() => void>(),
    close: new Set<() => void>(),
    end: new Set<(e?: BerthError) => void>(),
  }
  let state: SocketState = 'connecting'
  let ws: WebSocketLike | undefined
  let failures = 0
  let timer: ReturnType<typeof setTimeout> | undefined
  let endError: BerthError | undefined

  const rawSend = (message: ClientMessage) => {
    const data = JSON.stringify(message)
    if (state === 'open' && ws) ws.send(data)
    else outbox.push(data)
  }

  function end(error: BerthError | undefined) {
    if (state === 'closed') return
    state = 'closed'
    endError = error
    if (timer) clearTimeout(timer)
    const reason = error ?? socketError('ABORTED', 'The socket was closed', undefined, url)
    for (const p of pending.values()) p.reject(reason)
    pending.clear()
    for (const h of handlers.end) h(error)
  }

  function deliver(taskId: string, message: TaskMessage) {
    const sub = subs.get(taskId)
    if (!sub) return
    if (sub.listeners.size === 0) {
      if (sub.backlog.length < BACKLOG_LIMIT) sub.backlog.push(message)
      return
    }
    for (const l of sub.listeners) {
      if (message.type === 'task.event') {
        if (message.event.seq <= l.lastSeq) continue
        l.lastSeq = message.event.seq
      }
      l.fn(message)
    }
  }

  function onMessage(data: unknown) {
    let message: ServerMessage
    try {
      message = JSON.parse(frameText(data)) as ServerMessage
    } catch {
      return
    }
    for (const h of handlers.message) h(message)
    if (message.type === 'submitted') {
      const p = pending.get(message.request_id)
      if (!p) return
      pending.delete(message.request_id)
      if (!subs.has(message.task_id)) subs.set(message.task_id, { listeners: new Set(), backlog: [] })
      p.resolve({ request_id: message.request_id, task_id: message.task_id, status: message.status })
    } else if (message.type === 'error' && message.request_id !== undefined) {
      const p = pending.get(message.request_id)
      if (!p) return
      pending.delete(message.request_id)
      p.reject(socketError(message.code, message.error, message.details, url))
    } else if (message.type === 'task.event' || message.type === 'task.status') {
      deliver(message.task_id, message)
    }
  }

  async function open() {
    if (state === 'closed') return
    let token: string | undefined
    try {
      token = typeof options.token === 'function' ? await options.token() : options.token
    } catch (err) {
      return end(socketError('UNAUTHORIZED', `Could not get a token: ${String(err)}`, undefined, url))
    }
    if ((state as SocketState) === 'closed') return
    let socket: WebSocketLike
    try {
      socket = connect(url, token)
    } catch (err) {
      return end(
        new BerthError(String((err as Error).message ?? err), {
          status: 0,
          code: 'NETWORK_ERROR',
          route: 'ws',
          method: 'GET',
          url,
          cause: err,
        }),
      )
    }
    ws = socket
    let wasOpen = false
    socket.addEventListener('open', () => {
      if (ws !== socket) return
      wasOpen = true
      failures = 0
      state = 'open'
      // Again after a reconnect: unanswered submits (same request_id) and subscriptions.
      for (const [request_id, p] of pending) socket.send(JSON.stringify({ type: 'submit', request_id, task: p.task }))
      for (const task_id of subs.keys()) socket.send(JSON.stringify({ type: 'subscribe', task_id }))
      for (const data of outbox.splice(0)) socket.send(data)
      for (const h of handlers.open) h()
    })
    socket.addEventListener('message', (event) => {
      if (ws === socket) onMessage(event.data)
    })
    socket.addEventListener('error', () => {})
    socket.addEventListener('close', () => {
      if (ws !== socket) return
      ws = undefined
      if (wasOpen) for (const h of handlers.close) h()
      if (state === 'closed') return
      if (!wasOpen) failures++
      if (failures > reconnect.retries) {
        return end(
          new BerthError(`Could not connect to ${url}`, {
            status: 0,
            code: 'NETWORK_ERROR',
            route: 'ws',
            method: 'GET',
            url,
          }),
        )
      }
      state = 'reconnecting'
      const wait = failures === 0 ? 50 : Math.min(reconnect.delay * 2 ** (failures - 1), reconnect.maxDelay)
      timer = setTimeout(() => void open(), wait)
    })
  }

  void open()

  const socket: BerthSocket = {
    get state() {
      return state
    },
    submit(task, opts = {}) {
      if (state === 'closed')
        return Promise.reject(endError ?? socketError('ABORTED', 'The socket was closed', undefined, url))
      const request_id = opts.requestId ?? globalThis.crypto.randomUUID()
      return new Promise((resolve, reject) => {
        const signal = opts.signal
        if (signal?.aborted) return reject(signal.reason)
        const onAbort = () => {
          pending.delete(request_id)
          reject(signal!.reason)
        }
        signal?.addEventListener('abort', onAbort, { once: true })
        const done =
          <T>(fn: (v: T) => void) =>
          (v: T) => {
            signal?.removeEventListener('abort', onAbort)
            fn(v)
          }
        pending.set(request_id, { task, resolve: done(resolve), reject: done(reject) })
        if (state === 'open' && ws) ws.send(JSON.stringify({ type: 'submit', request_id, task }))
      })
    },
    subscribe(taskId, fn, opts = {}) {
      let sub = subs.get(taskId)
      const isNew = !sub
      if (!sub) {
        sub = { listeners: new Set(), backlog: [] }
        subs.set(taskId, sub)
      }
      const listener: Listener = { fn, lastSeq: opts.after ?? 0 }
      sub.listeners.add(listener)
      const backlog = sub.backlog.splice(0)
      for (const m of backlog) deliver(taskId, m)
      if (isNew) rawSend({ type: 'subscribe', task_id: taskId })
      return () => {
        const current = subs.get(taskId)
        if (!current?.listeners.delete(listener) || current.listeners.size > 0) return
        subs.delete(taskId)
        if (state === 'open') rawSend({ type: 'unsubscribe', task_id: taskId })
      }
    },
    on(event: keyof typeof handlers, listener: (arg: never) => void) {
      const set = handlers[event] as Set<typeof listener>
      set.add(listener)
      return () => void set.delete(listener)
    },
    send: rawSend,
    opened() {
      if (state === 'open') return Promise.resolve()
      if (state === 'closed')
        return Promise.reject(endError ?? socketError('ABORTED', 'The socket was closed', undefined, url))
      return new Promise((resolve, reject) => {
        const offOpen = socket.on('open', () => {
          offOpen()
          offEnd()
          resolve()
        })
        const offEnd = socket.on('end', (error) => {
          offOpen()
          offEnd()
          reject(error ?? socketError('ABORTED', 'The socket was closed', undefined, url))
        })
      })
    },
    close() {
      const current = ws
      ws = undefined
      end(undefined)
      current?.close(1000, 'client closed')
    },
  }
  return socket
}
