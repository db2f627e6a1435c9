import { ApiError } from '../errors.js'

/** When to try again after a 429 CONCURRENCY_LIMIT: a slot frees when a task ends or a session idles out. */
const RETRY_AFTER_SECONDS = 10

/**
 * Per-profile concurrency: at most `limit` workspaces running at once. A slot is taken
 * synchronously, so parallel submissions in one process are counted exactly; it is held
 * by a workspace until its container is released.
 *
 * @example
 * ```ts
 * const slots = new ConcurrencySlots(5)
 * slots.acquire('prof_1', 'ws_1') // throws 429 CONCURRENCY_LIMIT when 5 are held
 * slots.release('prof_1', 'ws_1')
 * ```
 */
export class ConcurrencySlots {
  private readonly held = new Map<string, Set<string>>()

  constructor(readonly limit: number) {}

  running(profileId: string): number {
    return this.held.get(profileId)?.size ?? 0
  }

  /** Every profile with slots held, and their holders (workspace ids). */
  snapshot(): { profile_id: string; holders: string[] }[] {
    return [...this.held].map(([profile_id, set]) => ({ profile_id, holders: [...set] }))
  }

  has(profileId: string, holder: string): boolean {
    return this.held.get(profileId)?.has(holder) ?? false
  }

  /** Take a slot for `holder` (idempotent for a holder that has one), or 429. */
  acquire(profileId: string, holder: string): void {
    let set = this.held.get(profileId)
    if (set?.has(holder)) return
    const running = set?.size ?? 0
    if (running >= this.limit) {
      throw new ApiError('CONCURRENCY_LIMIT', `Profile ${profileId} already has ${running} running workspaces (limit ${this.limit})`, {
        limit: this.limit,
        running,
        retry_after: RETRY_AFTER_SECONDS,
      }, { 'retry-after': String(RETRY_AFTER_SECONDS) })
    }
    if (!set) this.held.set(profileId, (set = new Set()))
    set.add(holder)
  }

  release(profileId: string, holder: string): void {
    const set = this.held.get(profileId)
    set?.delete(holder)
    if (set?.size === 0) this.held.delete(profileId)
  }
}
