/** The containers workspaces hold: leased for a run, kept warm for a session's follow-up, released when idle. */
import { isApiError } from '@berth/contract'
import type { CallerCaps } from '../limits/caller-caps.js'
import type { ConcurrencySlots } from '../limits/concurrency.js'
import type { Logger } from '../ports/logger.js'
import type { EnvironmentsService } from '../resources/environments.js'
import type { Lease } from '../runtime/index.js'
import type { WorkspaceSnapshots } from '../workspaces/workspace-snapshots.js'
import type { WorkspaceRecord, WorkspacesService } from '../workspaces/workspaces.js'
import type { Conversations } from './conversation.js'
import { LivingAgents } from './living-agents.js'
import type { Store } from '../ports/store.js'
import { claimContainer, requireEngine, type Claimed, type RunPlan, type TaskEngine } from './engine.js'
import type { MaterializeDeps } from './materialize.js'
import type { TaskRecord } from './task.js'
import type { Scheduler } from './scheduler.js'

export interface SessionContainersOptions {
  engine: TaskEngine | undefined
  workspaces: WorkspacesService
  environments: EnvironmentsService
  catalog: MaterializeDeps
  slots: ConcurrencySlots
  /** Per-caller caps: a workspace gives its caller's slot back with its container. */
  callers?: CallerCaps | undefined
  /** Whose answers say whether a workspace is still wanted (a task under way or queued). */
  scheduler: Scheduler
  conversations: Conversations
  logger: Logger
  /** A session's container is released after this long without a prompt (default 15 min). */
  sessionIdleMs?: number | undefined
  /** Keeps the files of a workspace without a volume when its container is released. */
  snapshots?: WorkspaceSnapshots | undefined
  /** Where a living agent's token is bound to each task it serves (with a credential broker). */
  store?: Store | undefined
}

/** A workspace's claimed container and its idle timer. */
interface Warm {
  lease: Lease
  timer: ReturnType<typeof setTimeout> | null
  /** The workspace's profile (whose concurrency slot it holds). */
  profile_id?: string | null
  /** When its idle clock started (`performance.now()`), for the longest-idle session to yield first. */
  idleSince?: number
}

/** A warm session no task is running or queued in: what a waiting task may have released (see `IdleYield`). */
export interface IdleSession {
  workspace_id: string
  owner_id: string
  profile_id: string | null
  /** How long it has been idle, in ms. */
  idle_ms: number
  /** The memory cap its container reserves against the host's memory budget (absent: the pool's default). */
  memory_bytes: number | undefined
}

export interface DetachOptions {
  /** Save the conversation first (no volume keeps it). */
  keepConversation?: boolean
  /** Called by the run that used the workspace, at its end. */
  fromRun?: boolean
  /** The workspace as the run left it (no read needed). */
  workspace?: WorkspaceRecord
  /** The conversation the run's result named, stored with the `idle` status. */
  sdkSessionId?: string
}

/**
 * The container of each workspace with one. A run leases it (waiting for a release under
 * way, reusing a session's warm container, or claiming a new one and restoring the kept
 * conversation); a session keeps it for `sessionIdleMs` after its prompt; a release saves
 * the conversation and files that no volume keeps, frees the concurrency slot, marks the
 * workspace idle and hands back the lease to reap.
 *
 * @example
 * ```ts
 * const { lease, workspace } = await containers.lease(plan, signal)
 * containers.keepWarm(owner, ws.id, ws.session_id) // or: await containers.release(owner, ws.id)
 * ```
 */
export class SessionContainers {
  private readonly warm = new Map<string, Warm>()
  /** Workspaces whose container is being released (conversation saved, then reaped). */
  private readonly releasing = new Map<string, Promise<unknown>>()
  /** Sessions' agents living between their tasks, in these containers. */
  readonly living: LivingAgents

  constructor(private readonly o: SessionContainersOptions) {
    const tokens = o.catalog?.broker?.tokens
    this.living = new LivingAgents({
      engine: o.engine,
      workspaces: o.workspaces,
      logger: o.logger,
      tokens: tokens && o.store ? { issuer: tokens, store: o.store } : undefined,
    })
  }

  /** Whether the workspace holds a container. */
  has(wsId: string): boolean {
    return this.warm.has(wsId)
  }

  /** A release of the workspace's container under way, finished (its conversation saved): a run reads its workspace after this. */
  async settled(wsId: string): Promise<void> {
    await this.releasing.get(wsId)
  }

  /**
   * The workspace's container for a run (after {@link settled}): a warm one is reused or a
   * new one claimed, its kept conversation put back. The workspace comes back as the claim
   * left it, for the run to store with its `running` status.
   */
  async lease(plan: RunPlan, signal: AbortSignal): Promise<Claimed> {
    const { task, workspace: ws } = plan
    const warm = this.warm.get(ws.id)
    if (warm) {
      if (warm.timer) clearTimeout(warm.timer)
      // The session's living agent takes the follow-up, if it still fits it (see TaskRuns).
      const agent = this.living.take(ws.id)
      return { lease: warm.lease, workspace: ws, input: null, agent, living: agent !== null }
    }
    const engine = requireEngine(this.o.engine)
    const claimed = await claimContainer({ ...this.o, engine }, plan, signal)
    this.warm.set(ws.id, { lease: claimed.lease, timer: null, profile_id: plan.profile.id })
    // A fork's copied files hold its conversation too (`.berth`).
    const seeded = ws.seed_files ? await this.plantSeed(engine, claimed) : false
    if (!claimed.agent && !ws.persistent && ws.sdk_session_id && !seeded) {
      // Nothing kept to resume from: the follow-up starts a new conversation.
      if (!(await this.o.conversations.restore(engine.runtime, claimed.lease.container.engine_id, ws)))
        claimed.workspace = { ...claimed.workspace, sdk_session_id: null }
    }
    // One more like this one for the next task (after this one's claim, so it takes no container
    // this one needed), started once this one has its first token (see WarmAgents.refill).
    if (claimed.input && engine.warmAgents) claimed.refill = engine.warmAgents.refill(task.owner_id, claimed.input)
    return claimed
  }

  /** Keep a session's container until it idles out; a playbook's (`pb-…`) goes at once, as no one is waiting to follow up. */
  keepWarm(owner: string, wsId: string, sessionId: string): void {
    const warm = this.warm.get(wsId)
    if (!warm) return
    warm.idleSince = performance.now()
    warm.timer = setTimeout(
      () => {
        // Not while a follow-up is running or waiting to.
        if (this.o.scheduler.isWanted(wsId)) return
        void this.releaseIdle(owner, wsId)
      },
      sessionId.startsWith('pb-') ? 0 : (this.o.sessionIdleMs ?? 15 * 60_000),
    )
    warm.timer.unref?.()
  }

  /** The warm sessions no task is running or queued in, longest idle first. */
  idleSessions(): IdleSession[] {
    const now = performance.now()
    const idle: IdleSession[] = []
    for (const [wsId, w] of this.warm) {
      const owner = w.lease.container.owner_id
      if (!w.timer || w.idleSince === undefined || !owner || this.o.scheduler.isWanted(wsId)) continue
      const { memory_bytes } = w.lease.container
      idle.push({
        workspace_id: wsId,
        owner_id: owner,
        profile_id: w.profile_id ?? null,
        idle_ms: now - w.idleSince,
        memory_bytes,
      })
    }
    return idle.sort((a, b) => b.idle_ms - a.idle_ms)
  }

  /**
   * Release an idle session now, as its idle timer would (its conversation and files kept; the
   * next follow-up resumes it), because a task waits for what it holds. Null when it is no
   * longer idle; else the release, settled once its container, slots and memory are given back.
   */
  yieldIdle(wsId: string): Promise<void> | null {
    const w = this.warm.get(wsId)
    const owner = w?.lease.container.owner_id
    if (!w?.timer || !owner || this.o.scheduler.isWanted(wsId)) return null
    clearTimeout(w.timer)
    w.timer = null
    return this.releaseIdle(owner, wsId)
  }

  /** Release a workspace's container (reaped), its concurrency slot, and mark it idle. */
  async release(owner: string, wsId: string): Promise<void> {
    await (await this.detach(owner, wsId))?.release()
  }

  /** Stop a session now, as its idle timer would: its agent ends, its conversation and files are kept, its container reaped. */
  async stop(owner: string, wsId: string): Promise<void> {
    if (this.warm.get(wsId)?.timer) clearTimeout(this.warm.get(wsId)!.timer!)
    await (await this.detach(owner, wsId, { keepConversation: true }))?.release()
  }

  /** A cancelled queued task may leave a workspace that never started: free its slot. */
  async releaseIfUnused(t: TaskRecord): Promise<void> {
    if (this.o.scheduler.isWanted(t.workspace_id) || this.warm.has(t.workspace_id)) return
    await this.release(t.owner_id, t.workspace_id)
  }

  /**
   * Free a workspace's concurrency slot and mark it idle; returns its container's lease for
   * the caller to release (reap) when convenient.
   */
  detach(owner: string, wsId: string, opts: DetachOptions = {}): Promise<Lease | undefined> {
    const done = this.detachNow(owner, wsId, opts)
    const tracked = done
      .catch(() => undefined)
      .finally(() => {
        if (this.releasing.get(wsId) === tracked) this.releasing.delete(wsId)
      })
    this.releasing.set(wsId, tracked)
    return done
  }

  /** After a restart: the pool's in-use containers come back with their workspaces. */
  adopt(): void {
    const pool = this.o.engine?.pool
    for (const c of pool?.list() ?? []) {
      if (c.state === 'in_use' && c.workspace_id)
        this.warm.set(c.workspace_id, { lease: pool!.leaseOf(c.id), timer: null })
    }
  }

  /** The engine id of the workspace's container, if it has one. */
  engineIdOf(wsId: string): string | undefined {
    return this.warm.get(wsId)?.lease.container.engine_id
  }

  /**
   * After a restart, a workspace that was running: with its container back it keeps it
   * (and its slot) until it idles out; without, it goes idle. Either waits for a task queued
   * for it (`followUpQueued`: recovery queues its tasks once every workspace is settled).
   */
  async resume(ws: WorkspaceRecord, followUpQueued: boolean): Promise<void> {
    // Its living agent went with the process that ran it: the next follow-up starts one (resuming the conversation).
    if (ws.agent) await this.o.workspaces.patch(ws.owner_id, ws.id, { agent: null })
    const warm = this.warm.get(ws.id)
    if (warm) warm.profile_id = ws.profile_id
    if (warm && ws.profile_id) {
      // Only a session's container comes back warm (a batch run's went with its recovery): one
      // recorded otherwise (a warm agent's `batch`, before its purpose followed the task) is put right.
      const c = warm.lease.container
      if (c.purpose !== 'session') await this.o.engine?.pool.assign(c.id, ws.id, 'session')
      this.o.slots.acquire(ws.profile_id, ws.id)
      this.o.callers?.adopt(ws.owner_id, ws.id)
      if (!followUpQueued) this.keepWarm(ws.owner_id, ws.id, ws.session_id)
    } else if (!followUpQueued) {
      await this.o.workspaces.setStatus(ws.owner_id, ws.id, 'idle', { container_id: null })
    }
  }

  /**
   * Release at once every warm session no task is running in, as its idle timer would: its
   * conversation and files kept, the workspace idle, the container reaped.
   */
  async releaseIdleSessions(): Promise<void> {
    const idle = [...this.warm].filter(([wsId]) => !this.o.scheduler.isBusy(wsId))
    await Promise.all(
      idle.map(([wsId, w]) => {
        if (w.timer) clearTimeout(w.timer)
        w.timer = null
        const owner = w.lease.container.owner_id
        return owner ? this.releaseIdle(owner, wsId) : undefined
      }),
    )
  }

  /** Stop the idle clocks (containers stay for the next start). */
  close(): void {
    for (const w of this.warm.values()) if (w.timer) clearTimeout(w.timer)
  }

  /**
   * Put a fork's copied files into its first container (onto its new volume, if it has one),
   * then drop them from the store: from now on the container or the volume holds them.
   */
  private async plantSeed(engine: TaskEngine, claimed: Claimed): Promise<boolean> {
    const { owner_id: owner, id } = claimed.workspace
    const snapshots = this.o.snapshots
    const planted = snapshots
      ? await snapshots.restore(engine.runtime, claimed.lease.container.engine_id, owner, id)
      : false
    await snapshots?.remove(owner, id)
    await this.o.workspaces.patch(owner, id, { seed_files: false })
    claimed.workspace = { ...claimed.workspace, seed_files: false }
    return planted
  }

  private releaseIdle(owner: string, wsId: string): Promise<void> {
    return this.detach(owner, wsId, { keepConversation: true })
      .then((lease) => lease?.release())
      .catch((err) => this.o.logger.warn('could not release a session', { workspace: wsId, error: String(err) }))
  }

  private async detachNow(owner: string, wsId: string, opts: DetachOptions): Promise<Lease | undefined> {
    const { engine, snapshots, logger } = this.o
    const warm = this.warm.get(wsId)
    this.warm.delete(wsId)
    if (warm?.timer) clearTimeout(warm.timer)
    // The agent goes first (its background work stopped, its conversation written out), then its files are kept.
    await this.living.end(wsId)
    const found = opts.workspace ?? (await this.o.workspaces.records.find(owner, wsId))
    const ws = found && opts.sdkSessionId ? { ...found, sdk_session_id: opts.sdkSessionId } : found
    // Without a volume the container's files go with it: keep the conversation at least.
    if (opts.keepConversation && warm && ws && !ws.volume && ws.sdk_session_id && engine) {
      await this.o.conversations
        .save(engine.runtime, warm.lease.container.engine_id, ws)
        .catch((err) => logger.warn('could not keep a session conversation', { workspace: wsId, error: String(err) }))
    }
    // Without a volume the files go with the container: copy them out first, so they stay readable.
    if (warm && ws && !ws.volume && engine && snapshots) {
      await snapshots
        .save(engine.runtime, warm.lease.container.engine_id, owner, wsId)
        .catch((err) => logger.warn('could not keep a workspace’s files', { workspace: wsId, error: String(err) }))
    }
    if (ws)
      await this.o.workspaces
        .setStatus(
          owner,
          wsId,
          'idle',
          opts.sdkSessionId
            ? { sdk_session_id: opts.sdkSessionId, container_id: null, agent: null }
            : { container_id: null, agent: null },
        )
        .catch((err: unknown) => {
          // Deleted meanwhile (a delete racing an idle release): its container, slot and cap still go back.
          if (!(isApiError(err) && err.code === 'NOT_FOUND')) throw err
        })
    // A follow-up already queued or starting keeps the workspace's slot: it runs next.
    // (A run releasing its own workspace is the busy one itself.)
    const followUp = (!opts.fromRun && this.o.scheduler.isBusy(wsId)) || this.o.scheduler.isQueued(wsId)
    if (ws?.profile_id && !followUp) this.o.slots.release(ws.profile_id, wsId)
    if (!followUp) {
      this.o.callers?.release(owner, wsId)
      // A task waiting for this profile's slot, or for its caller's, may start now.
      this.o.scheduler.wake()
    }
    return warm?.lease
  }
}
