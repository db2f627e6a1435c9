/** Steering a running task: decide its permission requests, interrupt it, hand it a message. */
import { ERROR_STATUS, type Approval, type Task, type TaskEvent } from '@berth/contract'
import { BerthError } from '../errors.js'
import type { BerthSocket } from '../socket.js'

/** A permission request as it appears in the transcript: `{ request_id, tool, input }`. */
export type PermissionRequest = Extract<TaskEvent, { type: 'permission_request' }>

/** What a caller says about a permission request. */
export interface DecisionOptions {
  /** Why: the agent is told this on a denial; kept with the request either way. */
  message?: string
  /** Replaces the tool's input when allowing (e.g. a safer command). */
  input?: Record<string, unknown>
}

/** A decision returned from `onPermissionRequest`: `'allow'`, `'deny'`, or with a message or input. */
export type Decision = 'allow' | 'deny' | ({ decision: 'allow' | 'deny' } & DecisionOptions)

/**
 * One task's steering, as `tasks.stream` and `tasks.run` hand it out: over their WebSocket
 * while it is open (`decide`, `send`, `interrupt` messages), over HTTP otherwise.
 */
export interface TaskControls {
  readonly taskId: string
  /** Let the tool run (with `input` instead of the agent's, when given). */
  approve(requestId: string, options?: DecisionOptions): Promise<void>
  /** Refuse the tool; the agent is told `message` and may go on another way. */
  deny(requestId: string, options?: Pick<DecisionOptions, 'message'>): Promise<void>
  /** Decide with a {@link Decision}. */
  decide(requestId: string, decision: Decision): Promise<void>
  /** Stop the current turn now; the task ends `cancelled` with `error.code` `INTERRUPTED`. */
  interrupt(): Promise<void>
  /** Hand the agent a message for its next turn boundary. */
  send(text: string): Promise<void>
}

/** The HTTP calls steering falls back to. */
export interface SteerDeps {
  decide(
    taskId: string,
    requestId: string,
    body: { decision: 'allow' | 'deny' } & DecisionOptions,
    signal?: AbortSignal,
  ): Promise<Approval>
  interrupt(taskId: string): Promise<Task>
  send(taskId: string, text: string): Promise<unknown>
}

/**
 * The `{ decision, message?, input? }` body for a {@link Decision}.
 *
 * @example
 * ```ts
 * decisionBody('deny') // { decision: 'deny' }
 * ```
 */
export function decisionBody(d: Decision): { decision: 'allow' | 'deny' } & DecisionOptions {
  return typeof d === 'string' ? { decision: d } : d
}

// Over the socket a decision is confirmed by its `permission_decision` event, or refused
// by an `error` message carrying the task's id (a 409 or 404 as the HTTP route gives).
function decideOverSocket(
  socket: BerthSocket,
  taskId: string,
  requestId: string,
  body: { decision: 'allow' | 'deny' } & DecisionOptions,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const finish = (error?: unknown) => {
      off()
      offEnd()
      if (error) reject(error)
      else resolve()
    }
    const fail = (code: string, error: string, details?: Record<string, unknown>) => {
      const status = (ERROR_STATUS as Record<string, number>)[code] ?? 0
      finish(new BerthError(error, { status, code, details, route: 'ws', method: 'GET', url: '' }))
    }
    const off = socket.on('message', (m) => {
      if (m.type === 'task.event' && m.task_id === taskId) {
        const e = m.event
        if (e.type !== 'permission_decision' || e.request_id !== requestId) return
        // Denied at its timeout before this decision arrived: it did not take.
        if (e.by === 'timeout') fail('CONFLICT', `Request ${requestId} expired before the decision`)
        else finish()
      } else if (m.type === 'error' && m.task_id === taskId) fail(m.code, m.error, m.details)
    })
    const offEnd = socket.on('end', (error) => finish(error ?? new Error('The socket closed before the decision')))
    socket.send({ type: 'decide', task_id: taskId, request_id: requestId, ...body })
  })
}

/**
 * Steering for one task: through `socket()` while it is open, else through `deps` (HTTP).
 *
 * @example
 * ```ts
 * const controls = createControls(deps, taskId, () => socket)
 * await controls.deny(event.request_id, { message: 'Not on main' })
 * ```
 */
export function createControls(
  deps: SteerDeps,
  taskId: string,
  socket: () => BerthSocket | undefined = () => undefined,
): TaskControls {
  const open = () => {
    const s = socket()
    return s?.state === 'open' ? s : undefined
  }
  const decide = async (requestId: string, decision: Decision) => {
    const body = decisionBody(decision)
    const s = open()
    if (s) await decideOverSocket(s, taskId, requestId, body)
    else await deps.decide(taskId, requestId, body)
  }
  return {
    taskId,
    decide,
    approve: (requestId, options = {}) => decide(requestId, { decision: 'allow', ...options }),
    deny: (requestId, options = {}) => decide(requestId, { decision: 'deny', ...options }),
    // Over the socket, an interrupt and a message have no reply of their own: they show in
    // the task's status and its `user_message` event; a refusal comes as an `error` message.
    async interrupt() {
      const s = open()
      if (s) s.send({ type: 'interrupt', task_id: taskId })
      else await deps.interrupt(taskId)
    },
    async send(text) {
      const s = open()
      if (s) s.send({ type: 'send', task_id: taskId, text })
      else await deps.send(taskId, text)
    },
  }
}

/** `tasks.approve`, `tasks.deny`, `tasks.interrupt`, `tasks.send`, `tasks.approvals`: steering by task id, over HTTP. */
export interface SteerHelpers {
  /**
   * Allow a permission request: the tool runs (with `input` instead of the agent's, when
   * given). Resolves with the request as decided; `CONFLICT` when it was already decided
   * or expired, `NOT_FOUND` for an unknown one or another caller's.
   *
   * @example
   * ```ts
   * for await (const e of berth.tasks.stream(taskId))
   *   if (e.type === 'permission_request') await berth.tasks.approve(taskId, e.request_id, { message: 'ok' })
   * ```
   */
  approve(taskId: string, requestId: string, options?: DecisionOptions): Promise<Approval>
  /**
   * Deny a permission request: the tool does not run, the agent is told `message`.
   *
   * @example
   * ```ts
   * await berth.tasks.deny(taskId, requestId, { message: 'Never push to main; open a branch' })
   * ```
   */
  deny(taskId: string, requestId: string, options?: Pick<DecisionOptions, 'message'>): Promise<Approval>
  /**
   * Stop the current turn now, mid-tool included: the task ends `cancelled` with its
   * partial `result` and `error.code` `INTERRUPTED` (a session's next follow-up continues
   * the conversation). A finished task is returned as it is.
   *
   * @example
   * ```ts
   * const task = await berth.tasks.interrupt(taskId)
   * ```
   */
  interrupt(taskId: string): Promise<Task>
  /**
   * Hand the running agent a message at its next turn boundary (a `user_message` event
   * when it takes it). `CONFLICT` once the task has ended.
   *
   * @example
   * ```ts
   * await berth.tasks.send(taskId, 'Use the staging database, not production')
   * ```
   */
  send(taskId: string, text: string): Promise<{ task_id: string; accepted: true }>
  /**
   * The task's permission requests still waiting for a decision.
   *
   * @example
   * ```ts
   * for (const a of await berth.tasks.approvals(taskId)) console.log(a.request_id, a.tool, a.input)
   * ```
   */
  approvals(taskId: string): Promise<Approval[]>
}
