/** Single-use keys that survive the loss of the coordination backend: each use is also a store record. */
import type { Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { OnceKeys } from './port.js'

/** Where used keys are recorded in the store (`once-keys:<key>`). */
export const ONCE_PREFIX = 'once-keys:'

/** A used key as the store keeps it. */
interface UsedKey {
  value: string
  /** Epoch ms (the clock's) after which the key may be used again, and the record swept. */
  expires_at: number
}

/** {@link OnceKeys} whose uses are recorded in the store, plus the sweep of expired records. */
export interface DurableOnceKeys extends OnceKeys {
  /** Remove the records of keys that have expired; how many went. */
  sweep(): Promise<number>
  /** The coordination's rebuild: nothing to put back (the store is the truth), expired records are swept. */
  rebuild(): Promise<number>
}

/**
 * Wrap the coordination's single-use keys so that a use outlives the backend: a key is
 * checked in the store first (a record there means it was used, whatever the backend says
 * after a flush), then claimed in the backend (atomic between instances), then recorded in
 * the store. The one window left: a flush between a winner's backend claim and its store
 * record (a few milliseconds) lets a second claimer in. With `store` null (one process,
 * whose memory backend ends with it) the keys are the backend's alone, as without the wrapper.
 *
 * @example
 * ```ts
 * const once = durableOnce(coordination.once, store, clock)
 * await once.claimOnce('oauth-state:n1', 600_000) // true; false from then on, even after a Redis flush
 * ```
 */
export function durableOnce(once: OnceKeys, store: Store | null, clock: Clock): DurableOnceKeys {
  if (!store) return { ...passThrough(once), sweep: async () => 0, rebuild: async () => 0 }
  const keyOf = (key: string) => `${ONCE_PREFIX}${key}`
  const used = async (key: string): Promise<UsedKey | null> => {
    const r = await store.get<UsedKey>(keyOf(key))
    return r && r.expires_at > clock.now() ? r : null
  }
  const record = (key: string, value: string, ttlMs: number) =>
    store.set<UsedKey>(keyOf(key), { value, expires_at: clock.now() + ttlMs })
  return {
    async claimOnce(key, ttlMs) {
      if (await used(key)) return false
      if (!(await once.claimOnce(key, ttlMs))) return false
      await record(key, '1', ttlMs)
      return true
    },
    async setIfAbsent(key, value, ttlMs) {
      const earlier = await used(key)
      if (earlier) return earlier.value
      const there = await once.setIfAbsent(key, value, ttlMs)
      if (there !== null) return there
      await record(key, value, ttlMs)
      return null
    },
    async get(key) {
      return (await used(key))?.value ?? (await once.get(key))
    },
    async delete(key) {
      await store.remove(keyOf(key))
      await once.delete(key)
    },
    async sweep() {
      const keys = await store.keys(ONCE_PREFIX)
      const records = await store.getMany<UsedKey>(keys)
      const now = clock.now()
      const gone = keys.filter((_, i) => (records[i]?.expires_at ?? 0) <= now)
      await Promise.all(gone.map((k) => store.remove(k)))
      return gone.length
    },
    rebuild() {
      return this.sweep()
    },
  }
}

/** The backend's own keys, unchanged. */
function passThrough(once: OnceKeys): OnceKeys {
  return {
    claimOnce: (key, ttlMs) => once.claimOnce(key, ttlMs),
    setIfAbsent: (key, value, ttlMs) => once.setIfAbsent(key, value, ttlMs),
    get: (key) => once.get(key),
    delete: (key) => once.delete(key),
  }
}
