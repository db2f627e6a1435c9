/** A task's states and the moves between them: one table, one function that applies a move (one write, one publish). */
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { OwnedCollection } from '../records/collection.js'
import type { TaskStatus } from '@berth/contract'
import type { EventLog } from '../workspaces/event-log.js'
import type { EventBus } from './event-bus.js'
import { activeKey, taskView, type TaskEnd, type TaskRecord } from './record.js'
import type { TaskEvents } from './task-events.js'

/**
 * The moves a task may make, from each status. A queued task starts, or ends without
 * running (cancelled, or failed when its instance was lost); a started one runs or ends;
 * an ended one never moves again. A new state (an approval to wait for) is one more row
 * here and the moves into and out of it.
 */
export const TRANSITIONS: Readonly<Record<TaskStatus, readonly TaskStatus[]>> = {
  queued: ['starting', 'failed', 'cancelled'],
  starting: ['running', 'failed', 'cancelled'],
  running: ['completed', 'failed', 'cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
}

/**
 * Whether a task in status `from` may move to `to`.
 *
 * @example
 * ```ts
 * canMove('queued', 'starting')  // true
 * canMove('completed', 'failed') // false: an ended task stays ended
 * ```
 */
export function canMove(from: TaskStatus, to: TaskStatus): boolean {
  return TRANSITIONS[from].includes(to)
}

/** Whether a status is an end (no move leaves it). */
export function isEnded(status: TaskStatus): boolean {
  return TRANSITIONS[status].length === 0
}

export interface TaskStatesOptions {
  records: OwnedCollection<TaskRecord>
  store: Store
  clock: Clock
  bus: EventBus
  eventLog: EventLog
  events: TaskEvents
}

/**
 * Applies a task's moves: each one is checked against {@link TRANSITIONS}, written once and
 * published once as `task.status`. A move the table refuses writes and publishes nothing
 * and answers the task as it was.
 *
 * @example
 * ```ts
 * await states.open(task) // queued
 * task = await states.move(task, 'starting')
 * task = await states.move(task, 'running', { started_at: now })
 * await states.finish(task, { status: 'completed', result })
 * ```
 */
export class TaskStates {
  constructor(private readonly o: TaskStatesOptions) {}

  /** A new task, `queued`: stored, listed as active (restart recovery reads that list), published. */
  async open(t: TaskRecord): Promise<void> {
    await this.o.records.put(t)
    await this.o.store.set(activeKey(t.id), { owner: t.owner_id })
    this.o.bus.publish({ type: 'task.status', task_id: t.id, status: t.status, task: taskView(t), owner_id: t.owner_id })
  }

  /**
   * Move `t` to `status` with `fields`, from the copy the caller holds: the caller is the
   * one part that changes its task's status while it runs, so no read is needed. An end
   * reads the stored copy once: another instance that took the task over for lost may have
   * ended it already, and an ended task stays ended.
   */
  async move(t: TaskRecord, status: TaskStatus, fields: Partial<TaskRecord> = {}): Promise<TaskRecord> {
    let current = t
    if (isEnded(status)) current = (await this.o.records.find(t.owner_id, t.id)) ?? t
    if (!canMove(current.status, status)) return current
    const next = { ...current, ...fields, status, updated_at: isoNow(this.o.clock) }
    await this.o.records.put(next)
    this.o.bus.publish({ type: 'task.status', task_id: t.id, status, task: taskView(next), owner_id: t.owner_id })
    return next
  }

  /** End a task: its events flushed, its end and event count stored, no longer recovered. */
  async finish(t: TaskRecord, end: TaskEnd): Promise<TaskRecord> {
    // Events first: a task stored as ended is never recovered again, so a crash between its
    // end and a later flush would lose the events its subscribers already saw.
    await this.o.eventLog.flush(t.owner_id, t.workspace_id)
    const counted = this.o.events.count(t.id)
    const fields: Partial<TaskRecord> = {
      finished_at: isoNow(this.o.clock),
      result: end.result ?? null,
      error: end.error ?? null,
      event_count: counted?.count ?? t.event_count ?? 0,
    }
    if (counted) fields.first_seq = counted.first
    const done = await this.move(t, end.status, fields)
    this.o.events.forget(t.id)
    await this.o.store.remove(activeKey(t.id))
    return done
  }
}
