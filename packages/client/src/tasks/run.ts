import type { Task } from '@berth/contract'
import { abortable, abortError } from '../internal/abort.js'
import type { BerthSocket, SubmitTaskInput } from '../socket.js'
import type { FollowOptions, TaskEvent } from './follow.js'
import { createControls, type Decision, type PermissionRequest, type SteerDeps, type TaskControls } from './steer.js'

/** The body of `tasks.run`: the submit body, with `mode` defaulting to `batch`. */
export type RunTaskBody = Omit<SubmitTaskInput, 'mode'> & { mode?: SubmitTaskInput['mode'] }

/** Options of `tasks.run`. */
export interface RunOptions {
  /** Stop waiting; the task is cancelled too unless `cancelOnAbort` is false. */
  signal?: AbortSignal
  /**
   * Every transcript event as it happens, once each, in `seq` order, with the task's
   * controls (`approve`, `deny`, `interrupt`, `send`: over the run's WebSocket while it is
   * open, HTTP otherwise).
   */
  onEvent?: (event: TaskEvent, controls: TaskControls) => void
  /**
   * A tool call waiting for a decision (a `require_approval` rule matched). Return (or
   * resolve) a {@link Decision} to send it, or nothing and decide later with `controls`.
   * From an `async` callback return the object form (`{ decision: 'allow' }`): TypeScript
   * widens a bare `'allow'` returned there to `string`.
   */
  onPermissionRequest?: (
    request: PermissionRequest,
    controls: TaskControls,
  ) => Decision | undefined | void | Promise<Decision | undefined> | Promise<void>
  /**
   * A decision returned by `onPermissionRequest` that could not be sent (e.g. `CONFLICT`:
   * the request had expired). Without it such a failure is dropped: the request is then
   * denied at its timeout, and the transcript says so.
   */
  onDecisionError?: (error: unknown, request: PermissionRequest) => void
  /** Called once the task id is known (before it runs), with its controls. */
  onSubmitted?: (taskId: string, controls: TaskControls) => void
  /** The WebSocket submit's `request_id` (default: random); the same id never makes a second task. */
  requestId?: string
  /** Cancel the task when `signal` aborts (default true). */
  cancelOnAbort?: boolean
}

/** What running a task needs from the client. */
export interface RunDeps {
  socket(): BerthSocket | undefined
  submit(body: SubmitTaskInput, signal: AbortSignal | undefined): Promise<{ task_id: string }>
  follow(taskId: string, options: FollowOptions): Promise<Task>
  cancel(taskId: string): Promise<unknown>
  steer: SteerDeps
}

/**
 * Submit a task and wait for it to finish: over the WebSocket when one opens (the submit
 * carries a `request_id`, so a resend after a reconnect never makes a second task), else
 * `POST /v1/tasks` and polling. Resolves with the finished task, whatever its status:
 * `result` when it ran, `error: { code, error }` when it failed. Permission requests go to
 * `onPermissionRequest` as they come.
 *
 * @example
 * ```ts
 * const task = await runTask(deps, { profile_id, prompt: 'Push it' }, {
 *   onPermissionRequest: (req) => (req.tool === 'Bash' ? 'allow' : { decision: 'deny', message: 'Bash only' }),
 * })
 * ```
 */
export async function runTask(deps: RunDeps, body: RunTaskBody, options: RunOptions = {}): Promise<Task> {
  const { signal } = options
  const task = { ...body, mode: body.mode ?? 'batch' } as SubmitTaskInput
  let socket = deps.socket()
  let taskId: string | undefined
  try {
    if (signal?.aborted) throw abortError(signal, 'tasks.run')
    if (socket) {
      // A socket that never opens (no WebSocket through a proxy, say): submit over HTTP.
      const opened = await abortable(socket.opened(), signal, 'tasks.run').then(
        () => true,
        (err: unknown) => {
          if (signal?.aborted) throw err
          return false
        },
      )
      if (!opened) {
        socket.close()
        socket = undefined
      }
    }
    taskId = socket
      ? (await socket.submit(task, { requestId: options.requestId, signal })).task_id
      : (await deps.submit(task, signal)).task_id
    const open = socket
    const controls = createControls(deps.steer, taskId, () => open)
    options.onSubmitted?.(taskId, controls)
    const onEvent = (event: TaskEvent) => {
      options.onEvent?.(event, controls)
      if (event.type === 'permission_request' && options.onPermissionRequest) {
        void Promise.resolve()
          .then(() => options.onPermissionRequest?.(event, controls))
          .then((decision) => decision && controls.decide(event.request_id, decision))
          .catch((err: unknown) => options.onDecisionError?.(err, event))
      }
    }
    return await deps.follow(taskId, { signal, onEvent, socket, known: true })
  } catch (err) {
    if (signal?.aborted) {
      if (taskId && options.cancelOnAbort !== false) await deps.cancel(taskId).catch(() => {})
      throw abortError(signal, 'tasks.run')
    }
    throw err
  } finally {
    socket?.close()
  }
}
