/** The coordination's side of tasks rebuilt from the store: queued tasks back on their queues, this instance's slots re-acquired. */
import type { Coordination } from '../coordination/port.js'
import type { CallerCaps } from '../limits/caller-caps.js'
import type { ConcurrencySlots } from '../limits/concurrency.js'
import type { Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { OwnedCollection } from '../records/collection.js'
import type { WorkspacesService } from '../workspaces/workspaces.js'
import { SHARED_QUEUE, instanceQueue } from './dispatch.js'
import type { Scheduler } from './scheduler.js'
import { ACTIVE, activeKey, type TaskRecord } from './task.js'

export interface TaskRebuildOptions {
  coordination: Coordination
  store: Store
  clock: Clock
  records: OwnedCollection<TaskRecord>
  scheduler: Scheduler
  slots: ConcurrencySlots
  /** Per-caller caps: their slots are re-acquired like the profiles'. */
  callers?: CallerCaps | undefined
  workspaces: WorkspacesService
}

/** What one rebuild did. */
export interface TaskRebuildResult {
  /** Queued tasks added back to a queue (a queue that still had one ignores it and is not counted). */
  requeued: number
  /** Slots re-acquired by this instance. */
  slots: number
}

/**
 * Puts back what the coordination backend lost about tasks, from the store, which holds
 * every task. A task still `queued` that no live instance took (no `instance_id`) goes back
 * on the queue it waits in: the queue of the instance holding its session's container, or
 * the shared one. `add` ignores an id a queue still has, and a job whose task another live
 * instance took meanwhile is acked and dropped by the taker, so several instances may
 * rebuild at once. Tasks of an instance that is missing are left to `LostInstances`. Slots
 * are re-acquired by the instance that holds them: its running tasks' and, after a reset,
 * every slot it holds and its warm sessions'.
 *
 * @example
 * ```ts
 * const r = await tasks.rebuilder.rebuild({ reset: true }) // { requeued: 3, slots: 2 }
 * ```
 */
export class TaskRebuild {
  constructor(private readonly o: TaskRebuildOptions) {}

  /**
   * Rebuild: `reset` after the backend came back empty (every slot this instance holds is
   * taken again); without it, the slow reconcile that heals a loss nobody noticed, which
   * requeues only tasks older than `olderThanMs`.
   */
  async rebuild(opts: { reset: boolean; olderThanMs?: number }): Promise<TaskRebuildResult> {
    const { coordination, slots, scheduler } = this.o
    const me = coordination.instanceId
    const alive = new Set(await coordination.instances.alive())
    const oldest = this.o.clock.now() - (opts.olderThanMs ?? 0)
    let requeued = 0
    let held = 0
    const callers = this.o.callers
    // `owner`: the workspace holds a container (or is about to), so its caller's slot too.
    const adopt = (profileId: string, holder: string, owner?: string) => {
      slots.adopt(profileId, holder)
      if (owner) callers?.adopt(owner, holder)
      held++
    }
    for (const t of await this.activeTasks()) {
      if (t.status !== 'queued') {
        if (t.instance_id === me) adopt(t.profile_id, t.workspace_id, t.owner_id)
        continue
      }
      // Taken by an instance: in its scheduler (or, when it is gone, LostInstances' to take over).
      if (t.instance_id) {
        if (t.instance_id === me && scheduler.has(t.id) && !t.slot_pending && opts.reset)
          adopt(t.profile_id, t.workspace_id)
        continue
      }
      if (Date.parse(t.created_at) > oldest) continue
      const queue = await this.queueOf(t, alive)
      const added = await coordination
        .queue(queue)
        .add({ id: t.id, owner: t.owner_id, priority: t.priority, payload: { owner: t.owner_id } })
      if (added) requeued++
    }
    if (opts.reset) {
      held += slots.reassert()
      callers?.reassert()
      for (const ws of await this.o.workspaces.allWithStatus(['running', 'starting']))
        if (ws.instance_id === me && ws.profile_id) adopt(ws.profile_id, ws.id, ws.owner_id)
    }
    return { requeued, slots: held }
  }

  /** A session's follow-up waits for the instance holding its container; anything else in the shared queue. */
  private async queueOf(t: TaskRecord, alive: Set<string>): Promise<string> {
    if (t.mode !== 'session') return SHARED_QUEUE
    const ws = await this.o.workspaces.records.find(t.owner_id, t.workspace_id)
    return ws?.container_id && ws.instance_id && alive.has(ws.instance_id)
      ? instanceQueue(ws.instance_id)
      : SHARED_QUEUE
  }

  /** Every task not yet ended (from the store's index of active tasks). */
  private async activeTasks(): Promise<TaskRecord[]> {
    const prefix = activeKey('')
    const refs = await this.o.store.keys(prefix)
    const owners = await this.o.store.getMany<{ owner: string }>(refs)
    const out: TaskRecord[] = []
    for (let i = 0; i < refs.length; i++) {
      const owner = owners[i]?.owner
      const t = owner ? await this.o.records.find(owner, refs[i]!.slice(prefix.length)) : null
      if (t && ACTIVE.includes(t.status)) out.push(t)
    }
    return out
  }
}
