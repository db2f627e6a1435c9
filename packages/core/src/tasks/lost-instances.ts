/** Tasks of an instance that died: ended CONTAINER_FAILED (running) or put back on the shared queue (queued) by a survivor. */
import type { Coordination, OnceKeys } from '../coordination/port.js'
import type { CallerCaps } from '../limits/caller-caps.js'
import type { ConcurrencySlots } from '../limits/concurrency.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { OwnedCollection } from '../records/collection.js'
import type { WorkspacesService } from '../workspaces/workspaces.js'
import { SHARED_QUEUE } from './dispatch.js'
import { ACTIVE, activeKey, type TaskRecord, type TaskStates } from './task.js'

export interface LostInstancesOptions {
  coordination: Coordination
  store: Store
  records: OwnedCollection<TaskRecord>
  states: TaskStates
  slots: ConcurrencySlots
  /** Per-caller caps whose slot a lost task's workspace held. */
  callers?: CallerCaps | undefined
  workspaces: WorkspacesService
  logger: Logger
  /** How long an instance stays missing from `alive()` before its tasks are taken over (default 30 s). */
  graceMs?: number | undefined
  /** How often to look (default 1 s). */
  pollMs?: number | undefined
  /** Where the take-over claims are made (default the coordination's single-use keys). */
  once?: OnceKeys | undefined
}

/** How long the claim on one lost task is kept (only one instance takes it over). */
export const LOST_CLAIM_TTL_MS = 24 * 3_600_000

/**
 * The claim key of a task left by its instance (`once.claimOnce(key, LOST_CLAIM_TTL_MS)`):
 * one per taking, so a queued task put back and taken again by the same instance (fenced
 * twice, say) is taken over again.
 *
 * @example
 * ```ts
 * if (await coordination.once.claimOnce(lostClaimKey(task), LOST_CLAIM_TTL_MS)) takeOver(task)
 * ```
 */
export function lostClaimKey(t: Pick<TaskRecord, 'id' | 'instance_id' | 'takes'>): string {
  return `task-lost:${t.id}:${t.instance_id ?? ''}${t.takes ? `:${t.takes}` : ''}`
}

/**
 * Watches for instances whose heartbeat lapsed: once one has been missing for `graceMs`
 * (and has not come back under its id, in which case its own restart recovery finishes its
 * tasks), one survivor ends each of its `starting`/`running` tasks with CONTAINER_FAILED,
 * frees their workspaces' slots, and puts its queued tasks on the shared queue.
 *
 * @example
 * ```ts
 * const lost = new LostInstances({ coordination, store, records, states, slots, workspaces, logger })
 * lost.start()
 * ```
 */
export class LostInstances {
  /** Instance id → when it was first seen missing (real time). */
  private readonly missingSince = new Map<string, number>()
  private timer: ReturnType<typeof setInterval> | null = null
  private scanning = false
  /** The live instances at the last look (null before the first: that one reads every task). */
  private seen: Set<string> | null = null

  constructor(private readonly o: LostInstancesOptions) {}

  start(): void {
    this.timer = setInterval(() => void this.scan(), this.o.pollMs ?? 1_000)
    this.timer.unref?.()
  }

  close(): void {
    if (this.timer) clearInterval(this.timer)
  }

  /** One look at every task not yet ended. */
  async scan(): Promise<void> {
    // Cut off from the coordination, this instance can neither see who is alive nor claim.
    const { reachable, leased } = this.o.coordination.state()
    if (this.scanning || !reachable || !leased) return
    this.scanning = true
    try {
      const { store, records, coordination } = this.o
      const alive = new Set(await coordination.instances.alive())
      for (const id of this.missingSince.keys()) if (alive.has(id)) this.missingSince.delete(id)
      // Tasks are read only while an instance is missing (or one just went, or at the first look).
      const vanished = this.seen === null || [...this.seen].some((id) => !alive.has(id))
      this.seen = alive
      if (!vanished && this.missingSince.size === 0) return
      const left = new Set<string>()
      const prefix = activeKey('')
      const refs = await store.keys(prefix)
      const owners = await store.getMany<{ owner: string }>(refs)
      const now = performance.now()
      for (let i = 0; i < refs.length; i++) {
        const owner = owners[i]?.owner
        const t = owner ? await records.find(owner, refs[i]!.slice(prefix.length)) : null
        if (!t || !ACTIVE.includes(t.status) || !t.instance_id || alive.has(t.instance_id)) continue
        left.add(t.instance_id)
        const since = this.missingSince.get(t.instance_id) ?? now
        this.missingSince.set(t.instance_id, since)
        if (now - since >= (this.o.graceMs ?? 30_000)) await this.takeOver(t)
      }
      // Nothing left of them: stop looking (a task they are given later finds them missing anew).
      for (const id of this.missingSince.keys()) if (!left.has(id)) this.missingSince.delete(id)
    } catch (err) {
      this.o.logger.warn('could not look for tasks of lost instances', { error: String(err) })
    } finally {
      this.scanning = false
    }
  }

  /** A task of a lost instance: queued ones go back on the shared queue, the others end. */
  async takeOver(t: TaskRecord): Promise<void> {
    const { coordination, records } = this.o
    if (!(await (this.o.once ?? coordination.once).claimOnce(lostClaimKey(t), LOST_CLAIM_TTL_MS))) return
    if (t.status === 'queued') {
      await records.put({ ...t, instance_id: null })
      // False: its job is still in the queue and comes back when its lease lapses.
      await coordination
        .queue(SHARED_QUEUE)
        .add({ id: t.id, owner: t.owner_id, priority: t.priority, payload: { owner: t.owner_id } })
      return
    }
    this.o.logger.warn('task ended: its instance was lost', { task: t.id, instance: t.instance_id })
    await this.o.states.finish(t, {
      status: 'failed',
      error: { code: 'CONTAINER_FAILED', error: `The Berth instance running the task (${t.instance_id}) was lost` },
    })
    await this.o.slots.releaseShared(t.profile_id, t.workspace_id).catch(() => {})
    await this.o.callers?.releaseShared(t.owner_id, t.workspace_id).catch(() => {})
    const ws = await this.o.workspaces.records.find(t.owner_id, t.workspace_id)
    if (ws && (ws.instance_id ?? t.instance_id) === t.instance_id) {
      await this.o.workspaces.setStatus(t.owner_id, ws.id, 'idle', { container_id: null, instance_id: null })
    }
  }
}
