/** The queue's dispatch: which queued task starts next, with its concurrency slot, and its run tracked. */
import type { ConcurrencySlots } from '../limits/concurrency.js'
import type { Logger } from '../ports/logger.js'
import type { TaskRecord } from './record.js'
import type { SessionContainers } from './session-containers.js'
import { nextQueued } from './task-queue.js'
import type { Workload } from './workload.js'

/** How long a run refused a shared slot waits before asking again. */
const SHARED_SLOT_RETRY_MS = 1_000

export interface SchedulerOptions {
  work: Workload
  slots: ConcurrencySlots
  containers: SessionContainers
  logger: Logger
  /** Run one task end to end; never throws (every path ends the task). */
  run(task: TaskRecord, signal: AbortSignal): Promise<void>
}

/**
 * Starts every queued task whose workspace is free (one task per workspace at a time), in
 * the order of {@link nextQueued}; a task queued without a slot (playbook runs) starts once
 * its profile has one, and an idle session of that profile is released to make one. The
 * pool orders the waits for containers. Wakes on {@link Workload.wake}.
 *
 * @example
 * ```ts
 * const scheduler = new Scheduler({ work, slots, containers, logger, run: (t, signal) => runs.run(t, signal) })
 * scheduler.enqueue(record)
 * ```
 */
export class Scheduler {
  private retry: ReturnType<typeof setTimeout> | null = null

  constructor(private readonly o: SchedulerOptions) {
    o.work.onWake(() => this.pump())
  }

  /** Queue a task; it starts after the current step when it may. */
  enqueue(task: TaskRecord): void {
    this.o.work.queue.push(task)
    this.o.work.wake()
  }

  /** Take a queued task out of the queue; false when it is not queued. */
  dequeue(taskId: string): boolean {
    const queue = this.o.work.queue
    const index = queue.findIndex((q) => q.id === taskId)
    if (index < 0) return false
    queue.splice(index, 1)
    return true
  }

  /** Stop a running task and wait for its run to end it; false when it is not running. */
  async abort(taskId: string, reason?: unknown): Promise<boolean> {
    const run = this.o.work.running.get(taskId)
    if (!run) return false
    run.abort.abort(reason)
    await run.done
    return true
  }

  /** Start every queued task that may start now. */
  pump(): void {
    const { work, slots } = this.o
    if (work.closed) return
    for (let i = this.nextIndex(); i >= 0; i = this.nextIndex()) {
      const task = work.queue.splice(i, 1)[0]!
      if (task.slot_pending && slots.isShared) {
        this.startWithSharedSlot(task)
        continue
      }
      if (task.slot_pending) {
        slots.acquire(task.profile_id, task.workspace_id)
        delete task.slot_pending
      }
      this.start(task)
    }
  }

  /**
   * A run that waits for a slot, when instances share the slots: this instance cannot know
   * they are free, so it asks (the workspace stays reserved meanwhile); refused, the run
   * goes back to the front of the queue and asks again after {@link SHARED_SLOT_RETRY_MS}.
   */
  private startWithSharedSlot(task: TaskRecord): void {
    const { work, slots } = this.o
    work.busy.set(task.workspace_id, task.owner_id)
    void slots
      .tryTake(task.profile_id, task.workspace_id)
      .catch((err: unknown) => {
        this.o.logger.warn('could not ask the shared slots; retrying', { task: task.id, error: String(err) })
        return false
      })
      .then((taken) => {
        work.busy.delete(task.workspace_id)
        if (taken && !work.closed) {
          delete task.slot_pending
          return this.start(task)
        }
        if (taken) slots.release(task.profile_id, task.workspace_id)
        work.queue.unshift(task)
        if (!this.retry && !work.closed) {
          this.retry = setTimeout(() => ((this.retry = null), this.pump()), SHARED_SLOT_RETRY_MS)
          this.retry.unref?.()
        }
      })
  }

  private start(task: TaskRecord): void {
    const { work } = this.o
    work.busy.set(task.workspace_id, task.owner_id)
    const abort = new AbortController()
    const done = this.o
      .run(task, abort.signal)
      .catch((err) => this.o.logger.error('task run failed unexpectedly', { task: task.id, error: String(err) }))
      .finally(() => {
        work.running.delete(task.id)
        work.busy.delete(task.workspace_id)
        this.pump()
      })
    work.running.set(task.id, { abort, done })
  }

  /** The next task to start: its workspace free and, for a task waiting for a slot, a slot free. */
  private nextIndex(): number {
    const { queue, busy } = this.o.work
    const index = nextQueued(queue, busy.values(), (t) => !busy.has(t.workspace_id) && (!t.slot_pending || this.slotFree(t)))
    if (index < 0) this.makeRoom()
    return index
  }

  private slotFree(t: TaskRecord): boolean {
    const { slots } = this.o
    return slots.has(t.profile_id, t.workspace_id) || slots.running(t.profile_id) < slots.limit
  }

  /** Tasks waiting for a slot that a warm but idle session holds: release one such session. */
  private makeRoom(): void {
    for (const t of this.o.work.queue) {
      if (!t.slot_pending || this.slotFree(t)) continue
      if (this.o.containers.evictIdle(t.profile_id, t.owner_id)) return
    }
  }
}
