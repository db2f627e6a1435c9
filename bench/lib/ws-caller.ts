/**
 * A caller that submits over the WebSocket (`{ type: "submit", request_id, task }` on
 * `/v1/ws`), as a client wanting the first token soonest does: the server subscribes the
 * socket to the task it created, so the events follow without a second round trip.
 * Times are `Date.now()`-based milliseconds with a fraction ({@link epochNow}), comparable
 * with the spans the server exports.
 */
import { randomUUID } from 'node:crypto'
import WebSocket from 'ws'

/** Epoch milliseconds with sub-millisecond resolution. */
export const epochNow = () => performance.timeOrigin + performance.now()

/** One task as the caller saw it. */
export interface WsTask {
  id: string
  /** Just before the submit frame was written. */
  sent: number
  /** The `submitted` answer arrived. */
  submitted?: number
  /** The session the task runs in (session mode) and its workspace, from the task in its `task.status` messages. */
  session_id?: string | null
  workspace_id?: string
  /** The first `task.event` of type `token`. */
  token?: number
  /** The `task.status` that ended the task. */
  end?: number
  status?: string
  error?: unknown
}

interface Message {
  type: string
  request_id?: string
  task_id?: string
  status?: string
  event?: { type: string }
  task?: { error?: unknown; session_id?: string | null; workspace_id?: string }
  code?: string
  error?: string
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled'])

/** A connected caller. */
export interface WsCaller {
  /** Submit one task and resolve once it ended. */
  run(task: Record<string, unknown>): Promise<WsTask>
  close(): void
}

/**
 * Connect to `base` (`http://127.0.0.1:<port>`) with the caller's bearer `token`.
 *
 * @example
 * ```ts
 * const caller = await connectWsCaller(url, token)
 * const t = await caller.run({ mode: 'batch', profile_id, prompt: '[[berth:text ok]]' })
 * console.log(t.token! - t.sent)
 * ```
 */
export async function connectWsCaller(base: string, token: string): Promise<WsCaller> {
  const socket = new WebSocket(`${base.replace(/^http/, 'ws')}/v1/ws`, {
    headers: { authorization: `Bearer ${token}` },
  })
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve())
    socket.once('error', reject)
    socket.once('unexpected-response', (_req, res) => reject(new Error(`WebSocket upgrade refused: ${res.statusCode}`)))
  })
  type Waiter = { task: WsTask; resolve: (t: WsTask) => void; reject: (e: Error) => void }
  const byRequest = new Map<string, Waiter>()
  const byTask = new Map<string, Waiter>()
  const failAll = (err: Error) => {
    for (const w of [...byRequest.values(), ...byTask.values()]) w.reject(err)
    byRequest.clear()
    byTask.clear()
  }
  socket.on('message', (data) => {
    const at = epochNow()
    const m = JSON.parse(String(data)) as Message
    if (m.type === 'error') {
      const w = (m.request_id && byRequest.get(m.request_id)) || (m.task_id && byTask.get(m.task_id))
      const err = new Error(`WebSocket error: ${m.code} ${m.error}`)
      if (w) w.reject(err)
      else failAll(err)
      return
    }
    if (m.type === 'submitted' && m.request_id && m.task_id) {
      const w = byRequest.get(m.request_id)
      if (!w) return
      byRequest.delete(m.request_id)
      w.task.id = m.task_id
      w.task.submitted = at
      byTask.set(m.task_id, w)
      return
    }
    const w = m.task_id ? byTask.get(m.task_id) : undefined
    if (!w) return
    if (m.type === 'task.status' && m.task?.workspace_id) {
      w.task.workspace_id = m.task.workspace_id
      w.task.session_id = m.task.session_id ?? null
    }
    if (m.type === 'task.event' && m.event?.type === 'token') w.task.token ??= at
    else if (m.type === 'task.status' && m.status && TERMINAL.has(m.status)) {
      w.task.end = at
      w.task.status = m.status
      w.task.error = m.task?.error ?? null
      byTask.delete(w.task.id)
      socket.send(JSON.stringify({ type: 'unsubscribe', task_id: w.task.id }))
      w.resolve(w.task)
    }
  })
  socket.on('close', () => failAll(new Error('WebSocket closed')))
  socket.on('error', (err) => failAll(err))
  return {
    run(task) {
      const requestId = randomUUID()
      return new Promise<WsTask>((resolve, reject) => {
        const t: WsTask = { id: '', sent: epochNow() }
        byRequest.set(requestId, { task: t, resolve, reject })
        socket.send(JSON.stringify({ type: 'submit', request_id: requestId, task }))
      })
    },
    close() {
      socket.removeAllListeners('close')
      socket.close()
    },
  }
}
