/** A task's transcript: its events stored in the workspace's log, pushed live, and counted. */
import type { TranscriptEvent, RunnerEvent } from '@berth/contract'
import type { EventLog } from '../workspaces/event-log.js'
import type { EventBus } from './event-bus.js'
import { ACTIVE, type EventCount, type TaskRecord } from './task.js'

/**
 * Records a task's events in its workspace's log and publishes them, counting them as they
 * come so that a page's total never reads the log. Counts of tasks under way live here
 * until the task ends (then they are stored on the task record).
 *
 * @example
 * ```ts
 * await events.record(task, [{ type: 'token', text: 'Hi' }])
 * await events.page(task, 0, 100) // { events: [...], total: 1 }
 * ```
 */
export class Transcript {
  private readonly counts = new Map<string, EventCount>()

  constructor(
    private readonly eventLog: EventLog,
    private readonly bus: EventBus,
  ) {}

  /** Store events in the workspace's log and push them to subscribers. */
  async record(task: TaskRecord, events: RunnerEvent[]): Promise<void> {
    const placed = await this.eventLog.append(
      task.owner_id,
      task.workspace_id,
      events.map((e) => ({ ...e, task_id: task.id })),
    )
    if (placed.length) {
      const c = this.counts.get(task.id)
      if (c) c.count += placed.length
      else
        this.counts.set(task.id, {
          count: (task.event_count ?? 0) + placed.length,
          first: task.first_seq ?? placed[0]!.seq,
        })
    }
    for (const event of placed)
      this.bus.publish({
        type: 'task.event',
        task_id: task.id,
        event,
        owner_id: task.owner_id,
        workspace_id: task.workspace_id,
        profile_id: task.profile_id,
      })
  }

  /**
   * A page of a task's own events from its workspace's log (`seq` is the workspace's) and
   * how many it has.
   */
  async page(t: TaskRecord, after: number, limit: number): Promise<{ events: TranscriptEvent[]; total: number }> {
    const live = this.counts.get(t.id)
    const first = live?.first ?? t.first_seq
    // The task's events start at `first`: the workspace's earlier tasks are not scanned.
    const from = first !== undefined ? Math.max(after, first - 1) : after
    const read = await this.eventLog.read(t.owner_id, t.workspace_id, { after: from, limit, taskId: t.id })
    // A `rewind` to this task names it, but is the session's event, not one of the task's.
    const events = read.filter((e) => e.type !== 'rewind')
    let total = live?.count ?? t.event_count
    if (total === undefined) {
      // Tasks recorded before counts were kept, or that never ran.
      total = ACTIVE.includes(t.status) ? 0 : (await this.stored(t)).length
    }
    return { events, total }
  }

  /** Every event of the task the log holds (restart recovery), counted from now on. */
  async recount(t: TaskRecord): Promise<TranscriptEvent[]> {
    const stored = await this.stored(t)
    if (stored.length) this.counts.set(t.id, { count: stored.length, first: stored[0]!.seq })
    return stored
  }

  /** The live count of a task under way. */
  count(taskId: string): EventCount | undefined {
    return this.counts.get(taskId)
  }

  /** Stop counting a task that ended (its count is stored on its record). */
  forget(taskId: string): void {
    this.counts.delete(taskId)
  }

  private async stored(t: TaskRecord): Promise<TranscriptEvent[]> {
    const all = { after: 0, limit: Number.MAX_SAFE_INTEGER, taskId: t.id }
    return (await this.eventLog.read(t.owner_id, t.workspace_id, all)).filter((e) => e.type !== 'rewind')
  }
}
