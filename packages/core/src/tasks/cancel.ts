/** Cancelling a task: its own abort reason, the cancel of a task this instance holds, and the wait for one another instance runs. */
import type { OwnedCollection } from '../records/collection.js'
import type { Task } from '@berth/contract'
import type { EventBus } from './event-bus.js'
import { ACTIVE, taskView, type TaskEnd, type TaskRecord, type TaskStates } from './task.js'
import type { Scheduler } from './scheduler.js'
import type { SessionContainers } from './session-containers.js'

/** How long a cancel of a task running on another instance waits for its end before answering. */
export const REMOTE_CANCEL_WAIT_MS = 10_000

/**
 * The reason a run's signal aborts with when its task is cancelled.
 *
 * @example
 * ```ts
 * abort.abort(new TaskCancelled('task_1'))
 * signal.reason instanceof TaskCancelled // true
 * ```
 */
export class TaskCancelled extends Error {
  override readonly name = 'TaskCancelled'
  constructor(readonly taskId: string) {
    super(`task ${taskId} was cancelled`)
  }
}

export interface CancelOptions {
  records: OwnedCollection<TaskRecord>
  states: TaskStates
  scheduler: Scheduler
  containers: SessionContainers
  bus: EventBus
}

/**
 * Cancels what this instance holds: a queued task leaves the queue and ends `cancelled`
 * (its unused workspace released); a running one is aborted with {@link TaskCancelled}
 * and its run ends it. For a task another instance runs, {@link LocalCancel.endOf} waits
 * for its end on the event bus (remote instances' messages are delivered to it).
 *
 * @example
 * ```ts
 * const cancels = new LocalCancel({ records, states, scheduler, containers, bus })
 * if (!(await cancels.here(task))) await cancels.endOf(task, REMOTE_CANCEL_WAIT_MS)
 * ```
 */
export class LocalCancel {
  constructor(private readonly o: CancelOptions) {}

  /** Cancel a task queued or running here; false when this instance holds it in neither. */
  async here(t: TaskRecord): Promise<boolean> {
    if (this.o.scheduler.dequeue(t.id)) {
      await this.ended(t)
      return true
    }
    return this.o.scheduler.abort(t.id, new TaskCancelled(t.id))
  }

  /** A task taken out of a queue (here or a shared one) ends `cancelled` (or as `end` says: an interrupt). */
  async ended(t: TaskRecord, end: TaskEnd = { status: 'cancelled' }): Promise<TaskRecord> {
    const done = await this.o.states.finish(t, end)
    await this.o.containers.releaseIfUnused(t)
    return done
  }

  /**
   * The task as it is once it ended (its `task.status` end heard on the bus), or as stored
   * after `timeoutMs` without one. Call it before asking for the cancel: no end is missed.
   */
  endOf(t: TaskRecord, timeoutMs: number): { ended: Promise<Task>; stop(): void } {
    let off = () => {}
    let timer: ReturnType<typeof setTimeout> | undefined
    const stop = () => {
      off()
      clearTimeout(timer)
    }
    const ended = new Promise<Task | null>((resolve) => {
      off = this.o.bus.subscribe(t.id, (m) => {
        if (m.type === 'task.status' && !ACTIVE.includes(m.status)) resolve(m.task)
      })
      timer = setTimeout(() => resolve(null), timeoutMs)
      timer.unref?.()
    })
      .then(async (task) => task ?? taskView(await this.o.records.get(t.owner_id, t.id)))
      .finally(stop)
    return { ended, stop }
  }
}
