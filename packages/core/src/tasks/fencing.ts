/** Fencing by lease: while this instance's coordination lease may have lapsed, it drives none of its tasks. */
import type { CoordinationChange, Coordination } from '../coordination/port.js'
import type { Logger } from '../ports/logger.js'
import type { OwnedCollection } from '../records/collection.js'
import type { Scheduler } from './scheduler.js'
import { ACTIVE, type TaskRecord } from './task.js'

/** How long a dropped task whose hand-over failed waits before it is tried again. */
const HAND_OVER_RETRY_MS = 1_000

/**
 * The reason a run's signal aborts with when its instance lost its lease: the run stops
 * without writing the task's end, its events or its notifications (whoever takes the task
 * over ends it).
 *
 * @example
 * ```ts
 * if (signal.reason instanceof TaskFenced) return // another instance ends the task
 * ```
 */
export class TaskFenced extends Error {
  override readonly name = 'TaskFenced'
  constructor() {
    super('this instance lost its coordination lease')
  }
}

export interface FencingOptions {
  coordination: Coordination
  scheduler: Scheduler
  records: OwnedCollection<TaskRecord>
  /** Ends (or requeues) a task, once over every instance (the lost-task claim). */
  lost: { takeOver(task: TaskRecord): Promise<void> }
  logger: Logger
  /** Called when the lease is back (take work again). */
  resumed(): void
}

/**
 * Watches the coordination state. When the lease turns false, the survivors may soon take
 * this instance's tasks over, so it stops first: its queue is emptied and its runs are aborted
 * with {@link TaskFenced}, writing nothing. When the lease is back, it takes work again and
 * hands each task it dropped to the lost-task takeover (the same single-use claim the
 * survivors use), so a task is ended exactly once whether or not a survivor got to it first.
 *
 * @example
 * ```ts
 * const fencing = new Fencing({ coordination, scheduler, records, lost, logger, resumed: () => dispatch.take() })
 * ```
 */
export class Fencing {
  private readonly dropped = new Map<string, TaskRecord>()
  private readonly off: () => void
  private retry: ReturnType<typeof setTimeout> | null = null
  private handing = false
  private closed = false

  constructor(private readonly o: FencingOptions) {
    this.off = o.coordination.onStateChange((change) => this.changed(change))
  }

  /** Whether this instance holds its lease (it may drive tasks). */
  get leased(): boolean {
    return this.o.coordination.state().leased
  }

  close(): void {
    this.closed = true
    this.off()
    if (this.retry) clearTimeout(this.retry)
    this.retry = null
  }

  private changed(change: CoordinationChange): void {
    if (!change.leased) {
      const tasks = this.o.scheduler.fence(new TaskFenced())
      if (tasks.length === 0) return
      for (const t of tasks) this.dropped.set(t.id, t)
      this.o.logger.warn('coordination lease lost: stopped driving tasks; they will be ended by a takeover', {
        tasks: tasks.length,
      })
      return
    }
    this.o.resumed()
    if (this.dropped.size > 0) void this.handOver()
  }

  /**
   * Each dropped task, unless it ended already, goes through the takeover (claimed once over
   * every instance). One that fails (the backend just back, the store busy) is tried again
   * every {@link HAND_OVER_RETRY_MS} while the lease holds: no other instance would ever
   * take it, as this one is alive and named on it.
   */
  private async handOver(): Promise<void> {
    if (this.handing) return
    this.handing = true
    try {
      for (const [id, t] of [...this.dropped]) {
        if (!this.leased) return
        try {
          const now = await this.o.records.find(t.owner_id, id)
          if (now && ACTIVE.includes(now.status) && now.instance_id === t.instance_id) await this.o.lost.takeOver(now)
          this.dropped.delete(id)
        } catch (err) {
          this.o.logger.warn('could not hand over a task dropped while unleased', { task: id, error: String(err) })
        }
      }
    } finally {
      this.handing = false
      if (this.dropped.size > 0 && this.leased && !this.retry && !this.closed) {
        this.retry = setTimeout(() => {
          this.retry = null
          void this.handOver()
        }, HAND_OVER_RETRY_MS)
        this.retry.unref?.()
      }
    }
  }
}
