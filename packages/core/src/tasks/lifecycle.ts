/** A task's status changes: stored, then published; its end stored with its events counted. */
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { OwnedCollection } from '../records/collection.js'
import type { TaskStatus } from '@berth/contract'
import type { EventLog } from '../workspaces/event-log.js'
import type { EventBus } from './event-bus.js'
import { ACTIVE, activeKey, taskView, type TaskEnd, type TaskRecord } from './record.js'
import type { TaskEvents } from './task-events.js'

export interface TaskLifecycleOptions {
  records: OwnedCollection<TaskRecord>
  store: Store
  clock: Clock
  bus: EventBus
  eventLog: EventLog
  events: TaskEvents
}

/**
 * Moves a task from status to status: each change is stored, then published to the bus.
 *
 * @example
 * ```ts
 * task = await lifecycle.setStatus(task, 'running', { started_at: now })
 * await lifecycle.finish(task, { status: 'completed', result })
 * ```
 */
export class TaskLifecycle {
  constructor(private readonly o: TaskLifecycleOptions) {}

  /** Store the task's new status (over its latest copy) and publish it. */
  async setStatus(t: TaskRecord, status: TaskStatus, extra: Partial<TaskRecord> = {}): Promise<TaskRecord> {
    const current = (await this.o.records.find(t.owner_id, t.id)) ?? t
    // An ended task stays ended (an instance taken for lost may still be finishing it).
    if (!ACTIVE.includes(current.status)) return current
    const next = { ...current, ...extra, status, updated_at: isoNow(this.o.clock) }
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
    const done = await this.setStatus(t, end.status, {
      finished_at: isoNow(this.o.clock),
      result: end.result ?? null,
      error: end.error ?? null,
      event_count: counted?.count ?? t.event_count ?? 0,
      ...(counted && { first_seq: counted.first }),
    })
    this.o.events.forget(t.id)
    await this.o.store.remove(activeKey(t.id))
    return done
  }
}
