import { createHash } from 'node:crypto'
import { randomToken } from '@berth/contract'
import type { Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'

/** How long a claim code works (10 minutes). */
export const CLAIM_CODE_TTL_MS = 10 * 60_000

/** `messenger-claims:<integration>:<sha256 of the code>`; used codes are kept until they expire, to tell reuse apart. */
interface ClaimRecord {
  owner: string
  expires_at: number
  used_at: number | null
}

/** A claim code in a message: `BERTH-` and 8 letters or digits, any case, also after `/start`. */
const CODE_IN_TEXT = /(?:^|[\s/])(BERTH-[A-Z0-9]{8})(?![A-Z0-9])/i

/** What a code sent to the bot amounts to. */
export type ClaimOutcome = 'claimed' | 'used' | 'invalid'

const digest = (code: string) => createHash('sha256').update(code.toUpperCase(), 'utf8').digest('hex')

/**
 * The claim code in a message text, if any.
 *
 * @example
 * ```ts
 * claimCodeIn('/start berth-ab12cd34') // 'BERTH-AB12CD34'
 * claimCodeIn('hello') // null
 * ```
 */
export function claimCodeIn(text: string): string | null {
  return CODE_IN_TEXT.exec(text.trim())?.[1]?.toUpperCase() ?? null
}

/**
 * One-time claim codes of a messenger bot: issued to its owner, sent to the bot from the
 * chat that should receive results, consumed once. Kept as hashes; a used code stays
 * (as used) until it would have expired, so reuse can be told apart from a wrong code.
 *
 * @example
 * ```ts
 * const { code } = await claims.issue('usr_1', 'int_1')
 * await claims.consume('int_1', code) // { outcome: 'claimed', owner: 'usr_1' }
 * await claims.consume('int_1', code) // { outcome: 'used', owner: 'usr_1' }
 * ```
 */
export class MessengerClaims {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  private key(integrationId: string, code: string): string {
    return `messenger-claims:${integrationId}:${digest(code)}`
  }

  /** A new code for the integration (earlier unused ones keep working until they expire). */
  async issue(owner: string, integrationId: string): Promise<{ code: string; expires_at: number }> {
    await this.sweep(integrationId)
    const code = `BERTH-${randomToken(8).toUpperCase()}`
    const expires_at = this.clock.now() + CLAIM_CODE_TTL_MS
    await this.store.set<ClaimRecord>(this.key(integrationId, code), { owner, expires_at, used_at: null })
    return { code, expires_at }
  }

  /** Use a code once. Callers serialise per integration, so two updates cannot both claim. */
  async consume(integrationId: string, code: string): Promise<{ outcome: ClaimOutcome; owner: string | null }> {
    const key = this.key(integrationId, code)
    const record = await this.store.get<ClaimRecord>(key)
    const now = this.clock.now()
    if (!record || record.expires_at <= now) return { outcome: 'invalid', owner: null }
    if (record.used_at !== null) return { outcome: 'used', owner: record.owner }
    await this.store.set<ClaimRecord>(key, { ...record, used_at: now })
    return { outcome: 'claimed', owner: record.owner }
  }

  /** When the newest unused, unexpired code expires (ms), or null. */
  async pendingUntil(integrationId: string): Promise<number | null> {
    const now = this.clock.now()
    const records = await this.store.getMany<ClaimRecord>(await this.store.keys(`messenger-claims:${integrationId}:`))
    const open = records
      .filter((r): r is ClaimRecord => r !== null && r.used_at === null && r.expires_at > now)
      .map((r) => r.expires_at)
    return open.length ? Math.max(...open) : null
  }

  /** Forget the integration's codes that expired (all of them with `all`). */
  async sweep(integrationId: string, all = false): Promise<void> {
    const now = this.clock.now()
    for (const key of await this.store.keys(`messenger-claims:${integrationId}:`)) {
      const r = await this.store.get<ClaimRecord>(key)
      if (all || !r || r.expires_at <= now) await this.store.remove(key)
    }
  }
}
