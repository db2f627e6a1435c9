import {
  ClientEnvelope,
  SLOW_CONSUMER_CLOSE,
  isApiError,
  type ServerMessage,
  type TaskEvent,
  type TranscriptEvent,
} from '@berth/contract'
import * as v from 'valibot'
import { asAnswer } from '../coordination/unavailable.js'
import { toIssues } from '../internal/input.js'
import type { Caller } from '../caller.js'
import type { TaskBusMessage } from '../tasks/event-bus.js'
import type { Services } from '../services.js'
import type { RateDecision } from '../limits/rate-limit.js'
import { readSubmittedTask, submitTask } from '../routes/tasks.js'
import { submitOnce } from './submit-once.js'

type Envelope = v.InferOutput<typeof ClientEnvelope>

export interface TaskSocketOptions {
  caller: Caller
  services: Services
  /** Send one message (JSON-serialisable). */
  send(message: ServerMessage): void
  /** Bytes queued to the client and not yet sent. */
  buffered(): number
  close(code: number, reason: string): void
  /** Queued bytes beyond which the socket is closed (default 1 MiB). */
  maxBuffered?: number
  /** Take one token of the caller's rate limit per message (messages count like requests). */
  take?: () => RateDecision | Promise<RateDecision>
}

/**
 * One client's WebSocket session: submit tasks exactly once per `request_id`, subscribe to
 * a task's status and events (what already happened first, then live, with no gap and no
 * duplicate), and errors as messages rather than a dropped socket. A client that lets more
 * than `maxBuffered` bytes queue up is closed with {@link SLOW_CONSUMER_CLOSE}: it cannot
 * stall the task or the server.
 *
 * @example
 * ```ts
 * const session = createTaskSocket({ caller, services, send: (m) => peer.send(JSON.stringify(m)), buffered: () => peer.bufferedAmount, close: (c, r) => peer.close(c, r) })
 * peer.on('message', (text) => session.message(text))
 * ```
 */
export function createTaskSocket(o: TaskSocketOptions) {
  const { caller, services } = o
  const maxBuffered = o.maxBuffered ?? 1024 * 1024
  const subscriptions = new Map<string, () => void>()
  let closed = false
  let open = true
  services.metrics.socketConnections(1)

  const send = (message: ServerMessage) => {
    if (closed) return
    if (o.buffered() > maxBuffered) {
      closed = true
      for (const off of subscriptions.values()) off()
      subscriptions.clear()
      o.close(SLOW_CONSUMER_CLOSE, 'slow consumer: too many messages waiting to be sent')
      return
    }
    o.send(message)
    services.metrics.socketMessage('out', message.type)
  }

  /** An error message, carrying the `request_id` or `task_id` of the message it answers (of type `type`). */
  const fail = (thrown: unknown, type: string, ids: { request_id?: string; task_id?: string } = {}) => {
    const err = asAnswer(thrown)
    // A 404 for another caller's task (or none) is counted in the audit log, as over HTTP.
    services.audit.denied(caller, `ws.${type}`, err)
    const body = isApiError(err) ? err.toJSON() : { code: 'INTERNAL_ERROR' as const, error: 'Internal error' }
    if (!isApiError(err)) services.logger.error('websocket message failed', { error: String(err) })
    send({ type: 'error', ...ids, ...body })
  }

  async function subscribe(taskId: string): Promise<void> {
    if (subscriptions.has(taskId)) return
    const task = await services.tasks.records.get(caller.id, taskId)
    // Listen first and hold live messages back, then replay the log: nothing falls between.
    let lastSeq = 0
    let replaying = true
    const held: TaskBusMessage[] = []
    const deliver = (m: TaskBusMessage) => {
      if (m.type === 'task.event') {
        if (m.event.seq <= lastSeq) return
        lastSeq = m.event.seq
        // The log holds runner events only, each with its place: a stored event is a TaskEvent.
        send({ type: 'task.event', task_id: m.task_id, event: m.event as TaskEvent })
      } else send({ type: 'task.status', task_id: m.task_id, status: m.status, task: m.task })
    }
    const off = services.bus.subscribe(taskId, (m) => (replaying ? held.push(m) : deliver(m)))
    subscriptions.set(taskId, off)
    send({ type: 'task.status', task_id: taskId, status: task.status, task: services.tasks.view(task) })
    for (;;) {
      const page: TranscriptEvent[] = await services.eventLog.read(caller.id, task.workspace_id, {
        after: lastSeq,
        limit: 500,
        taskId,
      })
      for (const event of page) deliver({ type: 'task.event', task_id: taskId, event })
      if (page.length < 500) break
    }
    replaying = false
    for (const m of held.splice(0)) deliver(m)
  }

  async function submit(requestId: string, raw: unknown): Promise<void> {
    const input = readSubmittedTask(raw)
    // The same request_id from this caller (a resend, a reconnect, another instance) is the same task.
    const taskId = await submitOnce(
      services,
      caller.id,
      requestId,
      async () => (await submitTask(services, caller, input)).task_id,
    )
    const task = await services.tasks.records.get(caller.id, taskId)
    send({ type: 'submitted', request_id: requestId, task_id: taskId, status: task.status })
    await subscribe(taskId)
  }

  /**
   * `decide`, `send` and `interrupt` call what their routes call; what they change shows in
   * the task's events and status. They are not waited for (an interrupt waits for the
   * task's end), so the socket's later messages are not held up; a failure is answered.
   */
  async function steer(m: Extract<Envelope, { type: 'decide' | 'send' | 'interrupt' }>): Promise<void> {
    const tasks = services.tasks.steer
    if (m.type === 'decide') {
      const { type: _type, task_id, request_id, ...body } = m
      await tasks.decide(caller.id, task_id, request_id, body)
    } else if (m.type === 'send') await tasks.message(caller.id, m.task_id, m.text)
    else await tasks.interrupt(caller.id, m.task_id)
  }

  /** Handle one message; messages of a socket are handled one after another, in order. */
  async function handle(text: string): Promise<void> {
    {
      let data: unknown
      try {
        data = JSON.parse(text)
      } catch {
        services.metrics.socketMessage('in', 'invalid')
        send({ type: 'error', code: 'VALIDATION_FAILED', error: 'Messages must be JSON' })
        return
      }
      const msg = v.safeParse(ClientEnvelope, data)
      services.metrics.socketMessage('in', msg.success ? msg.output.type : 'invalid')
      if (!msg.success) {
        send({
          type: 'error',
          code: 'VALIDATION_FAILED',
          error: 'Unknown or malformed message',
          details: { issues: toIssues('body', msg.issues) },
        })
        return
      }
      const m = msg.output
      const ids = m.type === 'submit' ? { request_id: m.request_id } : m.type === 'ping' ? {} : { task_id: m.task_id }
      if (o.take) {
        const d = await o.take()
        if (!d.allowed) {
          send({
            type: 'error',
            ...ids,
            code: 'RATE_LIMITED',
            error: 'Rate limit exceeded: WebSocket messages count like requests',
            details: { limit: d.limit, retry_after: d.retryAfterSeconds },
          })
          return
        }
      }
      try {
        if (m.type === 'ping') send({ type: 'pong' })
        else if (m.type === 'subscribe') await subscribe(m.task_id)
        else if (m.type === 'unsubscribe') {
          subscriptions.get(m.task_id)?.()
          subscriptions.delete(m.task_id)
        } else if (m.type === 'submit') await submit(m.request_id, m.task)
        else steer(m).catch((err: unknown) => fail(err, m.type, ids))
      } catch (err) {
        fail(err, m.type, ids)
      }
    }
  }

  let queue = Promise.resolve()
  return {
    /** Handle one text message from the client (after the ones before it). */
    message(text: string): Promise<void> {
      queue = queue.then(() => handle(text))
      return queue
    },
    /** The socket closed: drop every subscription. */
    close(): void {
      closed = true
      if (open) services.metrics.socketConnections(-1)
      open = false
      for (const off of subscriptions.values()) off()
      subscriptions.clear()
    },
  }
}
