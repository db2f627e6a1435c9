/**
 * The caller's side of the tasks benchmark: submits batch tasks over HTTP
 * (`POST /v1/tasks`) and follows each one over one WebSocket (`/v1/ws`, `subscribe`),
 * recording when each message arrived ({@link wallNow}, comparable with the server's
 * process).
 */
import WebSocket from 'ws'
import { wallNow } from './stats.js'

/** One task as its caller saw it; times are {@link wallNow} milliseconds. */
export interface ClientTask {
  id: string
  /** Just before the HTTP request was sent. */
  submit: number
  /** The 202 and its body were read. */
  accepted: number
  /** The subscription's first `task.status` (the state at subscribe time). */
  ack?: number
  ackStatus?: string
  /** The first `task.event` of type `token`. */
  token?: number
  /** The `task.event` of type `result`. */
  resultEvent?: number
  /** The `task.status` that ended the task. */
  end?: number
  status?: string
  error?: unknown
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled'])

interface Message {
  type: string
  task_id?: string
  status?: string
  event?: { type: string }
  task?: { error?: unknown }
  code?: string
  error?: string
}

/** A caller connected to one Berth. */
export interface TaskClient {
  /** Submit a batch task, subscribe to it, and resolve once it ended. `onAccepted` runs on the 202. */
  run(body: Record<string, unknown>, onAccepted?: (t: ClientTask) => void): Promise<ClientTask>
  close(): void
}

/**
 * Connect a caller (bearer `token`) to the Berth at `base` (`http://127.0.0.1:<port>`).
 * Submits that are refused with 429 CONCURRENCY_LIMIT are retried (counted in `refused`).
 *
 * @example
 * ```ts
 * const client = await connectClient('http://127.0.0.1:4000', token)
 * const t = await client.run({ mode: 'batch', profile_id, prompt: '[[berth:text ok]]' })
 * console.log(t.token! - t.submit, t.end! - t.submit)
 * ```
 */
export async function connectClient(
  base: string,
  token: string,
  stats: { refused: number } = { refused: 0 },
): Promise<TaskClient> {
  const socket = new WebSocket(`${base.replace(/^http/, 'ws')}/v1/ws`, {
    headers: { authorization: `Bearer ${token}` },
  })
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve())
    socket.once('error', reject)
    socket.once('unexpected-response', (_req, res) => reject(new Error(`WebSocket upgrade refused: ${res.statusCode}`)))
  })
  const live = new Map<string, { task: ClientTask; resolve: (t: ClientTask) => void; reject: (e: Error) => void }>()
  let failure: Error | null = null
  const failAll = (err: Error) => {
    failure = err
    for (const w of live.values()) w.reject(err)
    live.clear()
  }
  socket.on('message', (data) => {
    const at = wallNow()
    const m = JSON.parse(String(data)) as Message
    if (m.type === 'error') return failAll(new Error(`WebSocket error message: ${m.code} ${m.error}`))
    const w = m.task_id ? live.get(m.task_id) : undefined
    if (!w) return
    const t = w.task
    if (m.type === 'task.status') {
      if (t.ack === undefined) {
        t.ack = at
        t.ackStatus = m.status
      }
      if (m.status && TERMINAL.has(m.status)) {
        t.end = at
        t.status = m.status
        t.error = m.task?.error ?? null
        live.delete(t.id)
        socket.send(JSON.stringify({ type: 'unsubscribe', task_id: t.id }))
        w.resolve(t)
      }
    } else if (m.type === 'task.event') {
      if (m.event?.type === 'token') t.token ??= at
      else if (m.event?.type === 'result') t.resultEvent ??= at
    }
  })
  socket.on('close', () => failAll(new Error('WebSocket closed')))
  socket.on('error', (err) => failAll(err))

  return {
    async run(body, onAccepted) {
      for (;;) {
        if (failure) throw failure
        const submit = wallNow()
        const res = await fetch(`${base}/v1/tasks`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
        const text = await res.text()
        const accepted = wallNow()
        if (res.status === 429) {
          stats.refused++
          await new Promise((r) => setTimeout(r, 20))
          continue
        }
        if (res.status !== 202) throw new Error(`POST /v1/tasks → ${res.status} ${text}`)
        const task: ClientTask = { id: (JSON.parse(text) as { task_id: string }).task_id, submit, accepted }
        const done = new Promise<ClientTask>((resolve, reject) => live.set(task.id, { task, resolve, reject }))
        socket.send(JSON.stringify({ type: 'subscribe', task_id: task.id }))
        onAccepted?.(task)
        return await done
      }
    },
    close() {
      socket.removeAllListeners('close')
      socket.close()
    },
  }
}
