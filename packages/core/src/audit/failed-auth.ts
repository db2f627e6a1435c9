/** Failed authentication, counted per client address and minute and written as one audit entry each. */
import type { Clock } from '../ports/clock.js'

/** One address's failures in one minute that are not stored yet. */
export interface PendingFailures {
  /** The minute, as epoch ms of its start. */
  minute: number
  address: string
  count: number
  /** The first failed request's id. */
  request_id: string | null
}

/** Stores `pending` (adding its count to the minute's entry); false when it must wait for a later flush. */
export type WriteFailures = (pending: PendingFailures) => Promise<boolean>

/** Addresses counted at once before further ones are pooled under `other` (a spray of addresses costs no memory). */
const MAX_ADDRESSES = 10_000

/**
 * Counts failed authentications in memory and hands them to `write` on {@link flush}: a
 * burst of bad keys costs one store write per address and minute, not one per request.
 * Several instances add their counts to the same entry (the writer merges them).
 *
 * @example
 * ```ts
 * const failures = new FailedAuthCounter(clock, async (p) => { await store(p); return true })
 * failures.note('203.0.113.7', 'req_1')
 * await failures.flush()
 * ```
 */
export class FailedAuthCounter {
  private pending = new Map<string, PendingFailures>()

  constructor(
    private readonly clock: Clock,
    private readonly write: WriteFailures,
  ) {}

  /** Count one failed request from `address`. */
  note(address: string, requestId: string | null): void {
    const minute = Math.floor(this.clock.now() / 60_000) * 60_000
    let key = `${minute}|${address}`
    if (!this.pending.has(key) && this.pending.size >= MAX_ADDRESSES) {
      address = 'other'
      key = `${minute}|other`
    }
    const p = this.pending.get(key)
    if (p) p.count++
    else this.pending.set(key, { minute, address, count: 1, request_id: requestId })
  }

  /** Write every pending count; what could not be written now is kept (and added to) for the next flush. */
  async flush(): Promise<void> {
    const batch = this.pending
    this.pending = new Map()
    for (const [key, p] of batch) {
      const written = await this.write(p).catch(() => false)
      if (written) continue
      const later = this.pending.get(key)
      if (later) later.count += p.count
      else this.pending.set(key, p)
    }
  }
}
