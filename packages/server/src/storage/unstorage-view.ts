import type { Store } from '@berth/core'
import { createStorage, defineDriver, type Storage } from 'unstorage'

function parse(text: unknown): unknown {
  if (typeof text !== 'string') return text
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * An unstorage view of a `Store` (for `berth.storage` when Berth runs on its own store):
 * reads and plain writes by key. Writes made here are outside every list index.
 *
 * @example
 * ```ts
 * const storage = storageView(sqliteStore('./.data/berth.db'))
 * await storage.getKeys('pool')
 * ```
 */
export function storageView(store: Store): Storage {
  const driver = defineDriver(() => ({
    name: 'berth-store',
    hasItem: async (key: string) => (await store.get(key)) !== null,
    getItem: (key: string) => store.get(key),
    // unstorage hands drivers the serialised value.
    setItem: (key: string, value: string) => store.set(key, parse(value)),
    removeItem: (key: string) => store.remove(key),
    getKeys: (base: string) => store.keys(base ? (base.endsWith(':') ? base : `${base}:`) : ''),
    async clear() {
      for (const key of await store.keys('')) await store.remove(key)
    },
  }))
  return createStorage({ driver: driver(undefined) })
}
