import type { Task } from '@berth/contract'
import type { TaskEvent } from '../events.js'
import type { FollowOptions } from './follow.js'

/** Options of `tasks.stream`. */
export interface StreamOptions {
  /** Start after this `seq` (default 0: from the first event). */
  after?: number
  /** Stop streaming (the iterator throws `ABORTED`). */
  signal?: AbortSignal
}

/**
 * A task's events as an `AsyncIterable`: every event once, in `seq` order, across
 * reconnects; it ends when the task is finished. `break` (or `close()`) stops it.
 */
export interface TaskStream extends AsyncIterable<TaskEvent> {
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
 * const stream = createTaskStream((o) => followTask(deps, taskId, o), taskId, { after: 0 })
 * for await (const event of stream) console.log(event.seq, event.type)
 * ```
 */
export function createTaskStream(follow: (options: FollowOptions) => Promise<Task>, taskId: string, options: StreamOptions = {}): TaskStream {
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

  const start = (): Promise<Task> => {
    if (started) return started
    if (outer?.aborted) controller.abort(outer.reason)
    else outer?.addEventListener('abort', onOuterAbort, { once: true })
    started = follow({
      after: lastSeq,
      signal: controller.signal,
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
    taskId,
    get lastSeq() {
      return lastSeq
    },
    [Symbol.asyncIterator]: iterate,
    finalTask: start,
    close,
  }
}
