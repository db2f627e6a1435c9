import type { Slots, SlotLease } from '../coordination/port.js'
import { ApiError } from '@berth/contract'

/** When to try again after a 429 CONCURRENCY_LIMIT, unless the tasks holding the slots say when one frees (see `slotRefusal`). */
const RETRY_AFTER_SECONDS = 10

/** How long a slot lease lives without renewal (an instance that died stops counting after it). */
const DEFAULT_TTL_MS = 60_000

/** Options of {@link ConcurrencySlots} backed by shared slots. */
export interface SharedSlotsOptions {
  /** The coordination's slots: the limit holds over the sum of instances. */
  slots: Slots
  /** Lease ttl; leases are renewed every third of it while held here (default 60 s). */
  ttlMs?: number
}

/** Profiles remembered for the admin view (the oldest forgotten first). */
const MAX_KNOWN = 1_000

/**
 * Per-profile concurrency: at most `limit` workspaces running at once. A slot is held by a
 * workspace until its container is released. {@link take} counts over every instance
 * through the coordination's shared slots (leases renewed while held here); the synchronous
 * {@link acquire} records a slot this process knows it holds (restart recovery, queued
 * runs that waited for one).
 *
 * @example
 * ```ts
 * const slots = new ConcurrencySlots(5, { slots: coordination.slots })
 * await slots.take('prof_1', 'ws_1') // throws 429 CONCURRENCY_LIMIT when 5 are held
 * slots.release('prof_1', 'ws_1')
 * ```
 */
export class ConcurrencySlots {
  private readonly held = new Map<string, Set<string>>()
  /** Profiles asked for here (the admin view asks the shared slots about these). */
  private readonly known = new Set<string>()
  private readonly ttlMs: number
  private readonly prefix: string
  private timer: ReturnType<typeof setInterval> | null = null

  /** `prefix` names what the slots count (`profile`, the default, or `caller`): their coordination keys are `<prefix>:<id>`. */
  constructor(
    readonly limit: number,
    private readonly shared?: SharedSlotsOptions,
    opts: { prefix?: string } = {},
  ) {
    this.ttlMs = shared?.ttlMs ?? DEFAULT_TTL_MS
    this.prefix = opts.prefix ?? 'profile'
  }

  /** The coordination key of a profile's (or caller's) slots. */
  private slotKey(id: string): string {
    return `${this.prefix}:${id}`
  }

  running(profileId: string): number {
    return this.held.get(profileId)?.size ?? 0
  }

  /** Every profile with slots held here, and their holders (workspace ids). */
  snapshot(): { profile_id: string; holders: string[] }[] {
    return [...this.held].map(([profile_id, set]) => ({ profile_id, holders: [...set] }))
  }

  /**
   * Like {@link snapshot}, with the holders every instance counts (shared slots), for the
   * profiles this instance was asked about.
   */
  async sharedSnapshot(): Promise<{ profile_id: string; holders: string[] }[]> {
    const shared = this.shared
    if (!shared) return this.snapshot()
    const out = []
    for (const profile_id of new Set([...this.held.keys(), ...this.known])) {
      const local = [...(this.held.get(profile_id) ?? [])]
      const holders = await shared.slots.holders(this.slotKey(profile_id)).catch(() => local)
      const all = [...new Set([...local, ...holders])]
      if (all.length) out.push({ profile_id, holders: all })
    }
    return out
  }

  /** Whether slots are counted over several instances (a coordination's shared slots). */
  get isShared(): boolean {
    return this.shared !== undefined
  }

  has(profileId: string, holder: string): boolean {
    return this.held.get(profileId)?.has(holder) ?? false
  }

  /**
   * Take a slot for `holder` counted over every instance (idempotent for a holder that has
   * one anywhere), or 429 CONCURRENCY_LIMIT. `limit` replaces the slots' own for this key
   * (a caller's limit differs per caller).
   */
  async take(profileId: string, holder: string, limit = this.limit): Promise<void> {
    const shared = this.shared
    if (!shared) return this.acquire(profileId, holder, limit)
    this.known.delete(profileId)
    this.known.add(profileId)
    if (this.known.size > MAX_KNOWN) this.known.delete(this.known.values().next().value!)
    if (!this.has(profileId, holder) && this.running(profileId) >= limit)
      throw this.limitError(profileId, this.running(profileId), limit)
    const lease = await shared.slots.acquire(this.slotKey(profileId), limit, holder, this.ttlMs)
    if (!lease) throw this.limitError(profileId, await shared.slots.count(this.slotKey(profileId)), limit)
    this.hold(profileId, holder)
  }

  /** {@link take} that answers false instead of a 429 (a queued run that waits for a slot). */
  async tryTake(profileId: string, holder: string, limit = this.limit): Promise<boolean> {
    try {
      await this.take(profileId, holder, limit)
      return true
    } catch (err) {
      if (err instanceof ApiError && err.code === 'CONCURRENCY_LIMIT') return false
      throw err
    }
  }

  /** Take a slot for `holder` in this process (idempotent for a holder that has one), or 429. */
  acquire(profileId: string, holder: string, limit = this.limit): void {
    if (!this.has(profileId, holder) && this.running(profileId) >= limit)
      throw this.limitError(profileId, this.running(profileId), limit)
    this.hold(profileId, holder)
    // Counted for the other instances too (a slot this process already decided to hold).
    void this.shared?.slots
      .acquire(this.slotKey(profileId), Number.MAX_SAFE_INTEGER, holder, this.ttlMs)
      .catch(() => {})
  }

  /** Hold a slot another instance took for a workspace that now runs here (not counted again). */
  adopt(profileId: string, holder: string): void {
    this.hold(profileId, holder)
    this.adoptShared(profileId, holder)
  }

  private adoptShared(profileId: string, holder: string): number {
    if (!this.shared) return 0
    void this.shared.slots.acquire(this.slotKey(profileId), Number.MAX_SAFE_INTEGER, holder, this.ttlMs).catch(() => {})
    return 1
  }

  /**
   * Take again, in the shared slots, every slot held here (the backend lost its leases: it
   * was flushed or replaced). Not counted against the limit: these workspaces already run.
   * Answers how many were re-acquired.
   */
  reassert(): number {
    let n = 0
    for (const [profileId, set] of this.held) for (const holder of set) n += this.adoptShared(profileId, holder)
    return n
  }

  /** Stop renewing a slot here (another instance holds the workspace now); it stays taken. */
  forget(profileId: string, holder: string): void {
    this.drop(profileId, holder)
  }

  release(profileId: string, holder: string): void {
    this.drop(profileId, holder)
    void this.shared?.slots.release({ key: this.slotKey(profileId), holder }).catch(() => {})
  }

  /** Free a slot whatever instance held it (that instance is gone). */
  async releaseShared(profileId: string, holder: string): Promise<void> {
    this.drop(profileId, holder)
    await this.shared?.slots.release({ key: this.slotKey(profileId), holder })
  }

  /** Stop renewing leases (they lapse after their ttl unless released). */
  close(): void {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }

  private hold(profileId: string, holder: string): void {
    let set = this.held.get(profileId)
    if (!set) {
      set = new Set()
      this.held.set(profileId, set)
    }
    set.add(holder)
    if (this.shared && !this.timer) {
      this.timer = setInterval(() => void this.renewAll(), Math.max(50, Math.floor(this.ttlMs / 3)))
      this.timer.unref?.()
    }
  }

  private drop(profileId: string, holder: string): void {
    const set = this.held.get(profileId)
    set?.delete(holder)
    if (set?.size === 0) this.held.delete(profileId)
  }

  /** Renew every lease held here; one released elsewhere (its workspace ended there) is dropped. */
  private async renewAll(): Promise<void> {
    const shared = this.shared!
    for (const [profileId, set] of [...this.held]) {
      for (const holder of [...set]) {
        const lease: SlotLease = { key: this.slotKey(profileId), holder, expiresAt: 0 }
        const renewed = await shared.slots.renew(lease, this.ttlMs).catch(() => lease)
        if (!renewed) this.drop(profileId, holder)
      }
    }
  }

  private limitError(profileId: string, running: number, limit: number): ApiError {
    const whose = this.prefix === 'profile' ? 'Profile' : `The ${this.prefix}`
    return new ApiError(
      'CONCURRENCY_LIMIT',
      `${whose} ${profileId} already has ${running} running workspaces (limit ${limit})`,
      {
        limit,
        running,
        retry_after: RETRY_AFTER_SECONDS,
      },
      { 'retry-after': String(RETRY_AFTER_SECONDS) },
    )
  }
}
