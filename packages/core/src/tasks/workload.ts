/** The work under way in this process: queued tasks, busy workspaces, running runs. */
import type { TaskRecord } from './record.js'

/** A task being run, and how to stop it. */
export interface RunningTask {
  abort: AbortController
  done: Promise<void>
}

/**
 * What the scheduler and the session containers both look at: the queue, the workspaces
 * with a task under way, the runs in flight, and whether the service still takes work.
 * `wake()` asks the scheduler to look at the queue again (a slot or a workspace freed).
 *
 * @example
 * ```ts
 * const work = new Workload()
 * work.onWake(() => scheduler.pump())
 * if (!work.wanted(wsId)) release(wsId)
 * ```
 */
export class Workload {
  readonly queue: TaskRecord[] = []
  /** Workspaces with a task under way → their owner. */
  readonly busy = new Map<string, string>()
  /** Runs in flight, by task id. */
  readonly running = new Map<string, RunningTask>()
  closed = false
  private readonly wakers: (() => void)[] = []

  /** Whether a task of the workspace waits in the queue. */
  queued(wsId: string): boolean {
    return this.queue.some((t) => t.workspace_id === wsId)
  }

  /** Whether the workspace has a task under way or waiting. */
  wanted(wsId: string): boolean {
    return this.busy.has(wsId) || this.queued(wsId)
  }

  onWake(fn: () => void): void {
    this.wakers.push(fn)
  }

  /** Look at the queue again, after the current step. */
  wake(): void {
    queueMicrotask(() => {
      for (const fn of this.wakers) fn()
    })
  }
}
