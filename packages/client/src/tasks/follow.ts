import type { Task } from '@berth/contract'
import { isFinished, type TaskEvent } from '../events.js'
import { abortable, abortError } from '../internal/abort.js'
import { sleep } from '../internal/sleep.js'
import type { BerthSocket } from '../socket.js'

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
