import type { Store } from '@berth/core'
import type { Storage } from 'unstorage'

/**
 * The core `Store` port over an unstorage instance. Any unstorage driver works (fs,
 * memory, redis, db0, ...); values are stored as JSON.
 *
 * @example
 * ```ts
 * import { createStorage } from 'unstorage'
 * const store = unstorageStore(createStorage())
 * await store.set('profiles:usr_1:prof_1', { id: 'prof_1' })
 * ```
 */
export function unstorageStore(storage: Storage): Store {
  return {
    async get<T>(key: string) {
      return ((await storage.getItem(key)) as T | null) ?? null
    },
    async getMany<T>(keys: string[]) {
      if (keys.length === 0) return []
      const items = await storage.getItems(keys)
      const byKey = new Map(items.map((i) => [i.key, i.value as T | null]))
      return keys.map((k) => byKey.get(k) ?? null)
    },
    async set<T>(key: string, value: T) {
      await storage.setItem(key, value as never)
    },
    async remove(key: string) {
      await storage.removeItem(key)
    },
    async keys(prefix: string) {
      // unstorage normalises keys (":" separators); ask for the base, keep exact-prefix matches.
      const base = prefix.endsWith(':') ? prefix.slice(0, -1) : prefix
      const keys = await storage.getKeys(base)
      return keys.filter((k) => k.startsWith(prefix))
    },
  }
}
