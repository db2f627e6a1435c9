import { createHash, hash as oneShotHash, timingSafeEqual } from 'node:crypto'
import { notFound, newId, randomToken, CallerKey, IssuedCallerKey, type User } from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { Caller } from '../caller.js'
import type { Coordination } from '../coordination/port.js'
import { TellAll } from '../coordination/tell-all.js'
import { offsetOf, pageFrom, paginate, type Page, type Paged } from '../records/collection.js'
import { indexEntryFor, listOrder } from '../records/indexes.js'
import { toView } from '../records/view.js'

/** Prefix of every caller key, so leaked keys are recognisable by secret scanners. */
export const CALLER_KEY_PREFIX = 'berth_sk_'

/** Caller id the deployment's operator token authenticates as. */
export const OPERATOR_ID = 'usr_operator'

interface StoredKey extends CallerKey {
  hash: string
}

/**
 * SHA-256 hex of a caller key; the only form in which keys are stored.
 *
 * @example
 * ```ts
 * hashKey('berth_sk_abc') // '5d41...'
 * ```
 */
export function hashKey(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex')
}

export interface UsersOptions {
  store: Store
  clock: Clock
  /** The deployment's operator token (`BERTH_ADMIN_TOKEN`); absent means none works. */
  adminToken?: string | undefined
  /** How long a verified key is trusted before the store is asked again (ms). */
  cacheMs?: number
  /** The coordination other instances share: a revocation waits until none of them trusts the key. */
  shared?: Coordination | undefined
}

/** What a revocation tells every instance to forget: one key's hash, or every key (a user removed). */
type Forget = { hash: string } | { all: true }

/**
 * Users, caller keys and bearer authentication. Keys are random, shown once, stored as
 * SHA-256 hashes. A key verified within `cacheMs` is answered from memory; revoking a key or
 * deleting a user takes effect at once on every instance: the call returns once every other
 * live instance has forgotten the key (or `cacheMs` has passed, after which none trusts it).
 *
 * @example
 * ```ts
 * const users = new UsersService({ store, clock: systemClock })
 * const { user, key } = await users.create({ name: 'Ada' })
 * await users.authenticate(key.token) // { id: user.id, role: 'user', key_id: key.id }
 * ```
 */
export class UsersService {
  private readonly store: Store
  private readonly clock: Clock
  /** SHA-256 of the operator token: compared in constant time with the token's hash. */
  private readonly adminHash: Buffer | undefined
  private readonly cacheMs: number
  private readonly cache = new Map<string, { caller: Caller; until: number }>()
  /** Bumped by every forget: a lookup begun before one does not keep its answer. */
  private generation = 0
  private readonly lastTouched = new Map<string, number>()
  private readonly forgets: TellAll<Forget> | undefined

  constructor(opts: UsersOptions) {
    this.store = opts.store
    this.clock = opts.clock
    this.adminHash = opts.adminToken ? createHash('sha256').update(opts.adminToken, 'utf8').digest() : undefined
    this.cacheMs = opts.cacheMs ?? 5_000
    this.forgets = opts.shared && new TellAll(opts.shared, 'caller-keys:forget', (m) => this.forget(m))
  }

  /** Stop listening to the other instances. */
  async close(): Promise<void> {
    await this.forgets?.close()
  }

  private forget(m: Forget): void {
    this.generation++
    if ('all' in m) this.cache.clear()
    else this.cache.delete(m.hash)
  }

  /** Forget here, and on every other instance before returning (see {@link TellAll}). */
  private async forgetEverywhere(m: Forget): Promise<void> {
    if (this.forgets) await this.forgets.tell(m, this.cacheMs)
    else this.forget(m)
  }

  /** Create a user and its first caller key (the token is in the result, once). */
  async create(input: {
    name: string
    role?: 'user' | 'admin' | undefined
  }): Promise<{ user: User; key: IssuedCallerKey }> {
    const user: User = {
      id: newId('user'),
      name: input.name,
      role: input.role ?? 'user',
      created_at: isoNow(this.clock),
    }
    await this.store.put(`users:${user.id}`, user, indexEntryFor(`users:${user.id}`, user)!)
    const key = await this.issueKey(user.id, {})
    return { user, key }
  }

  async get(id: string): Promise<User> {
    const user = await this.store.get<User>(`users:${id}`)
    if (!user) throw notFound('user', id)
    return user
  }

  async list(page: Page): Promise<Paged<User>> {
    const query = { offset: offsetOf(page), limit: page.limit + 1, after: page.after }
    const { items, total } = await this.store.list<User>('users', query)
    return pageFrom(items, page.limit, total, (u) => listOrder('users', u))
  }

  /** Delete a user and revoke all its keys. Its resources stay in the store, unreachable. */
  async remove(id: string): Promise<void> {
    await this.get(id)
    for (const key of await this.keysOf(id)) await this.revokeKey(key.id)
    await this.store.remove(`users:${id}`)
    await this.forgetEverywhere({ all: true })
  }

  /** Issue another caller key for a user. The token is returned once. */
  async issueKey(userId: string, input: { name?: string | undefined }): Promise<IssuedCallerKey> {
    await this.get(userId)
    const token = `${CALLER_KEY_PREFIX}${randomToken(40)}`
    const stored: StoredKey = {
      id: newId('callerKey'),
      user_id: userId,
      name: input.name ?? null,
      created_at: isoNow(this.clock),
      last_used_at: null,
      hash: hashKey(token),
    }
    await this.store.set(`callerkeys:${stored.hash}`, stored)
    await this.store.set(`callerkey-ids:${stored.id}`, { hash: stored.hash, user_id: userId })
    return toView(IssuedCallerKey, stored, { token })
  }

  /** Revoke a key; answers whose key it was. */
  async revokeKey(keyId: string): Promise<{ user_id: string }> {
    const ref = await this.store.get<{ hash: string; user_id: string }>(`callerkey-ids:${keyId}`)
    if (!ref) throw notFound('key', keyId)
    await this.store.remove(`callerkeys:${ref.hash}`)
    await this.store.remove(`callerkey-ids:${keyId}`)
    await this.store.remove(`callerkey-used:${keyId}`)
    await this.forgetEverywhere({ hash: ref.hash })
    return { user_id: ref.user_id }
  }

  /** A user's caller keys (metadata only, never a token or hash), newest first. */
  async listKeys(userId: string, page: Page): Promise<Paged<CallerKey>> {
    await this.get(userId)
    const refs = await this.store.getMany<{ hash: string }>(
      (await this.keysOf(userId)).map((k) => `callerkey-ids:${k.id}`),
    )
    const stored = (
      await this.store.getMany<StoredKey>(refs.flatMap((r) => (r ? [`callerkeys:${r.hash}`] : [])))
    ).filter((k): k is StoredKey => k !== null)
    const used = await this.store.getMany<{ at: string }>(stored.map((k) => `callerkey-used:${k.id}`))
    const keys = stored
      // Keys used before their use had a record of its own carry it inline.
      .map((k, i) => toView(CallerKey, k, { last_used_at: used[i]?.at ?? k.last_used_at }))
      .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : a.id < b.id ? 1 : -1))
    return paginate(keys, page, (k) => `${k.created_at}|${k.id}`)
  }

  private async keysOf(userId: string): Promise<{ id: string }[]> {
    const keys = await this.store.keys('callerkey-ids:')
    const refs = await this.store.getMany<{ user_id: string }>(keys)
    return keys.flatMap((k, i) => (refs[i]?.user_id === userId ? [{ id: k.slice('callerkey-ids:'.length) }] : []))
  }

  /**
   * The caller a bearer token stands for, or `null`. The operator token is an admin caller
   * with id {@link OPERATOR_ID}.
   */
  authenticate(token: string): Caller | null | Promise<Caller | null> {
    if (!token || token.length > 4096) return null
    // One hash per request serves both the operator check and the key lookup.
    // The one-shot hash: about half the CPU of a Hash object for a short input.
    const digest = oneShotHash('sha256', token, 'buffer')
    if (this.adminHash && timingSafeEqual(digest, this.adminHash)) return { id: OPERATOR_ID, role: 'admin' }
    if (!token.startsWith(CALLER_KEY_PREFIX) || token.length > 200) return null
    const hash = digest.toString('hex')
    const now = this.clock.now()
    // A key verified within the last `cacheMs` answers without a promise: most requests.
    const hit = this.cache.get(hash)
    if (hit && hit.until > now) return hit.caller
    return this.lookup(hash, now)
  }

  /** The store lookup behind {@link authenticate} for a key not in the cache. */
  private async lookup(hash: string, now: number): Promise<Caller | null> {
    const generation = this.generation
    const key = await this.store.get<StoredKey>(`callerkeys:${hash}`)
    if (!key) return null
    const user = await this.store.get<User>(`users:${key.user_id}`)
    if (!user) return null
    const caller: Caller = { id: user.id, role: user.role, key_id: key.id }
    // A revocation since the reads began may have removed what they found: answer, keep nothing.
    if (generation !== this.generation) return caller
    this.cache.set(hash, { caller, until: now + this.cacheMs })
    // Record use at most once a minute per key: a write per request would dominate reads. Its
    // own record, never the key's: a write of the key racing its revocation would bring it back.
    if ((this.lastTouched.get(key.id) ?? 0) + 60_000 <= now) {
      this.lastTouched.set(key.id, now)
      await this.store.set(`callerkey-used:${key.id}`, { at: isoNow(this.clock) })
    }
    return caller
  }
}
