/** A task's events, followed to its end: with a callback ({@link followTask}) or as an async iterable ({@link createTaskStream}). */
import { isEndedStatus, type EndedTaskStatus, type Task, type TaskEvent, type TaskStatus } from '@berth/contract'
import { abortable, abortError } from '../internal/abort.js'
import { sleep } from '../internal/sleep.js'
import type { BerthSocket } from '../socket.js'
import { createControls, type SteerDeps, type TaskControls } from './steer.js'

/**
 * One transcript event of a task, as stored: the runner's event (`user_message`,
 * `turn_start`, `token`, `tool_call`, `permission_request`, `permission_decision`,
 * `tool_result`, `turn_end`, `result`, `error`) plus its
 * place in the log (`seq`, increasing by one), when it happened (`at`) and its `task_id`.
 * Narrow it by `type`:
 *
 * @example
 * ```ts
 * if (event.type === 'token') process.stdout.write(event.text)
 * if (event.type === 'tool_call') console.log(event.name, event.input)
 * ```
 */
export type { TaskEvent }

/** The event of one `type`, e.g. `TaskEventOf<'tool_call'>`. */
export type TaskEventOf<T extends TaskEvent['type']> = Extract<TaskEvent, { type: T }>

/** A task as read (`GET /v1/tasks/:id`). */
export type { Task, TaskStatus }

/**
 * True once a task can change no more: `completed`, `failed` or `cancelled`.
 *
 * @example
 * ```ts
 * if (isFinished(task.status)) console.log(task.result?.text ?? task.error?.code)
 * ```
 */
export function isFinished(status: TaskStatus): status is EndedTaskStatus {
  return isEndedStatus(status)
}

/** The events page size of `GET /v1/tasks/:id/events` (its maximum). */
export const EVENTS_PAGE = 100

/** What following a task needs from the client. */
export interface FollowDeps {
  get(taskId: string, signal: AbortSignal | undefined): Promise<Task>
  /** One page of events after `after`, at most {@link EVENTS_PAGE}. */
  events(taskId: string, after: number, signal: AbortSignal | undefined): Promise<TaskEvent[]>
  /** A new socket, or `undefined` to poll. */
  socket(): BerthSocket | undefined
  /** Milliseconds between polls. */
  pollInterval: number
}

/** Options of {@link followTask}. */
export interface FollowOptions {
  /** Only events with a greater `seq`. */
  after?: number | undefined
  signal?: AbortSignal | undefined
  onEvent?: ((event: TaskEvent) => void) | undefined
  /** A socket already subscribed to the task (a WebSocket submit); closed by its owner. */
  socket?: BerthSocket | undefined
  /** The task is known to exist and be the caller's (skips the first read). */
  known?: boolean | undefined
  /** Told the socket the follow uses, if any (steering goes through it while it is open). */
  onSocket?: ((socket: BerthSocket | undefined) => void) | undefined
}

/**
 * Follow a task to its end: every event once, in `seq` order, then the finished task.
 * Over the WebSocket while it can (it reconnects and resumes by itself); when the socket
 * gives up, or there is none, over `GET /v1/tasks/:id/events?after=`. Once the task is
 * finished the log is read once more over HTTP, so nothing the socket missed is lost.
 *
 * @example
 * ```ts
 * const task = await followTask(deps, taskId, { onEvent: (e) => console.log(e.seq, e.type) })
 * ```
 */
export async function followTask(deps: FollowDeps, taskId: string, opts: FollowOptions = {}): Promise<Task> {
  const { signal } = opts
  let lastSeq = opts.after ?? 0
  const emit = (event: TaskEvent) => {
    if (event.seq <= lastSeq) return
    lastSeq = event.seq
    opts.onEvent?.(event)
  }
  // A task that is not the caller's is a 404 here, not a silent subscription.
  if (!opts.known) await deps.get(taskId, signal)
  const own = opts.socket ? undefined : deps.socket()
  const socket = opts.socket ?? own
  opts.onSocket?.(socket)
  let finished = false
  try {
    if (socket) {
      await new Promise<void>((resolve, reject) => {
        let off: (() => void) | undefined
        let offEnd: (() => void) | undefined
        let settled = false
        const settle = (error?: unknown) => {
          if (settled) return
          settled = true
          off?.()
          offEnd?.()
          signal?.removeEventListener('abort', onAbort)
          if (error) reject(error)
          else resolve()
        }
        const onAbort = () => settle(abortError(signal, 'tasks.follow'))
        if (signal?.aborted) return onAbort()
        signal?.addEventListener('abort', onAbort, { once: true })
        // The socket gave up reconnecting (or is closed): go on over HTTP from the last seq.
        offEnd = socket.on('end', () => settle())
        off = socket.subscribe(
          taskId,
          (m) => {
            if (m.type === 'task.event') emit(m.event)
            else if (isFinished(m.status)) {
              finished = true
              settle()
            }
          },
          { after: lastSeq },
        )
        if (settled) off()
        if (socket.state === 'closed') settle()
      })
    }
    for (;;) {
      const page = await deps.events(taskId, lastSeq, signal)
      for (const event of page) emit(event)
      if (page.length >= EVENTS_PAGE) continue
      if (finished) break
      const task = await deps.get(taskId, signal)
      // Finished: its log is complete now; read the rest once more, then stop.
      if (isFinished(task.status)) finished = true
      else await abortable(sleep(deps.pollInterval), signal, 'tasks.follow')
    }
    return await deps.get(taskId, signal)
  } finally {
    own?.close()
  }
}

/** Options of `tasks.stream`. */
export interface StreamOptions {
  /** Start after this `seq` (default 0: from the first event). */
  after?: number
  /** Stop streaming (the iterator throws `ABORTED`). */
  signal?: AbortSignal
}

/**
 * A task's events as an `AsyncIterable`: every event once, in `seq` order, across
 * reconnects; it ends when the task is finished. `break` (or `close()`) stops it. Its
 * {@link TaskControls} (`approve`, `deny`, `interrupt`, `send`) steer the task over the
 * stream's WebSocket while it is open, over HTTP otherwise.
 */
export interface TaskStream extends AsyncIterable<TaskEvent>, TaskControls {
  readonly taskId: string
  /** The `seq` of the last event delivered (resume a later stream with `{ after }`). */
  readonly lastSeq: number
  /** The finished task: waits for the end (reading the events if you do not). */
  finalTask(): Promise<Task>
  /** Stop following; a pending `finalTask()` rejects with `ABORTED`. */
  close(): void
}

/**
 * Wrap a follower into a {@link TaskStream}. Nothing is requested until the stream is
 * iterated or `finalTask()` is called.
 *
 * @example
 * ```ts
 * const stream = createTaskStream((o) => followTask(deps, taskId, o), taskId, { after: 0 }, steer)
 * for await (const event of stream) if (event.type === 'permission_request') await stream.approve(event.request_id)
 * ```
 */
export function createTaskStream(
  follow: (options: FollowOptions) => Promise<Task>,
  taskId: string,
  options: StreamOptions,
  steer: SteerDeps,
): TaskStream {
  const controller = new AbortController()
  const outer = options.signal
  const onOuterAbort = () => controller.abort(outer?.reason)
  const queue: TaskEvent[] = []
  let lastSeq = options.after ?? 0
  let wake: (() => void) | undefined
  let done = false
  let closed = false
  let failure: unknown
  let started: Promise<Task> | undefined
  let socket: BerthSocket | undefined
  const controls = createControls(steer, taskId, () => socket)

  const start = (): Promise<Task> => {
    if (started) return started
    if (outer?.aborted) controller.abort(outer.reason)
    else outer?.addEventListener('abort', onOuterAbort, { once: true })
    started = follow({
      after: lastSeq,
      signal: controller.signal,
      onSocket: (s) => (socket = s),
      onEvent: (event) => {
        queue.push(event)
        wake?.()
      },
    }).then(
      (task) => {
        done = true
        wake?.()
        return task
      },
      (err: unknown) => {
        done = true
        failure = err
        wake?.()
        throw err
      },
    )
    started.catch(() => {}).finally(() => outer?.removeEventListener('abort', onOuterAbort))
    return started
  }

  const close = () => {
    if (done || closed) return
    closed = true
    controller.abort()
    wake?.()
  }

  async function* iterate(): AsyncGenerator<TaskEvent> {
    void start()
    try {
      for (;;) {
        const next = queue.shift()
        if (next) {
          lastSeq = next.seq
          yield next
          continue
        }
        if (closed) return
        if (done) {
          if (failure !== undefined) throw failure
          return
        }
        await new Promise<void>((resolve) => (wake = resolve))
        wake = undefined
      }
    } finally {
      // `break`, `return` or a throw in the loop body: stop following.
      close()
    }
  }

  return {
    ...controls,
    get lastSeq() {
      return lastSeq
    },
    [Symbol.asyncIterator]: iterate,
    finalTask: start,
    close,
  }
}
