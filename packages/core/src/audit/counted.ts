/**
 * Refusals counted per minute and written as one audit entry each (failed authentication,
 * requests for ids a caller does not have, egress refused): a burst costs memory for one
 * entry and one store write per entry and minute, not one per request.
 */
import type { AuditAction, AuditActor, AuditTarget } from '@berth/contract'
import type { Clock } from '../ports/clock.js'

/** Names, ids and counts: never a secret value. */
export type AuditDetails = Record<string, string | number | boolean | null>

/** A counted entry as its first refusal of the minute made it (the writer adds `details.count`). */
export interface CountedEntry {
  action: AuditAction
  actor: AuditActor
  target: AuditTarget
  request_id: string | null
  source: string | null
  details: AuditDetails
  /** The users who see the entry in their own log. */
  owners: string[]
}

/** One entry's refusals in one minute that are not stored yet. */
export interface PendingCount {
  /** The minute, as epoch ms of its start. */
  minute: number
  /** What the entry counts within its minute (its id is derived from both). */
  key: string
  count: number
  entry: CountedEntry
}

/** Stores `pending` (adding its count to the minute's entry); false when it must wait for a later flush. */
export type WriteCounts = (pending: PendingCount) => Promise<boolean>

/** Where a refusal is counted past a cap: another key (e.g. `other`) and its entry. */
export type Overflow = () => { key: string; entry: CountedEntry }

/** Keys counted at once before further ones go to their overflow (a spray of addresses costs no memory). */
const MAX_KEYS = 10_000

/**
 * Counts refusals in memory by key and minute and hands them to `write` on {@link flush}.
 * Several instances add their counts to the same entry (the writer merges them). A key
 * may belong to a group whose distinct keys per minute are capped (one task's hosts): past
 * the cap, and past {@link MAX_KEYS} pending keys, refusals go to the overflow's key.
 *
 * @example
 * ```ts
 * const counts = new MinuteCounts(clock, async (p) => { await store(p); return true })
 * counts.note('203.0.113.7', () => entry, () => ({ key: 'other', entry: otherEntry }))
 * await counts.flush()
 * ```
 */
export class MinuteCounts {
  private pending = new Map<string, PendingCount>()
  /** The distinct keys seen per group and minute (`<minute>|<group>`), for the group cap. */
  private groups = new Map<string, Set<string>>()

  constructor(
    private readonly clock: Clock,
    private readonly write: WriteCounts,
  ) {}

  /** Count one refusal under `key`; `entry` is built only for the minute's first. */
  note(key: string, entry: () => CountedEntry, overflow: Overflow, group?: { name: string; max: number }): void {
    const minute = Math.floor(this.clock.now() / 60_000) * 60_000
    let slot = `${minute}|${key}`
    let make = entry
    const over = () => {
      const o = overflow()
      key = o.key
      slot = `${minute}|${o.key}`
      make = () => o.entry
    }
    if (group) {
      const name = `${minute}|${group.name}`
      const seen = this.groups.get(name) ?? new Set<string>()
      this.groups.set(name, seen)
      if (!seen.has(key) && seen.size >= group.max) over()
      else seen.add(key)
    }
    if (!this.pending.has(slot) && this.pending.size >= MAX_KEYS) over()
    const p = this.pending.get(slot)
    if (p) p.count++
    else this.pending.set(slot, { minute, key, count: 1, entry: make() })
  }

  /** Write every pending count; what could not be written now is kept (and added to) for the next flush. */
  async flush(): Promise<void> {
    const batch = this.pending
    this.pending = new Map()
    const minute = Math.floor(this.clock.now() / 60_000) * 60_000
    for (const name of this.groups.keys())
      if (Number(name.slice(0, name.indexOf('|'))) < minute) this.groups.delete(name)
    for (const [slot, p] of batch) {
      const written = await this.write(p).catch(() => false)
      if (written) continue
      const later = this.pending.get(slot)
      if (later) later.count += p.count
      else this.pending.set(slot, p)
    }
  }
}
