import { indexEntryFor, type IndexEntry, type IndexQuery, type Store } from '@berth/core'
import { LRUCache } from 'lru-cache'
import type { Storage } from 'unstorage'
import { derivedEntries } from './storage/entries.js'
import { OrderedIndexes } from './storage/ordered-index.js'

export interface UnstorageStoreOptions {
  /**
   * Keep read values in memory (up to `cacheEntries`), updated by this process's writes.
   * Only correct when this process is the store's sole writer, e.g. the fs driver of a
   * single server; leave it off for a store shared by several instances.
   */
  cache?: boolean
  cacheEntries?: number
}

/**
 * The core `Store` port over an unstorage instance. Any unstorage driver works (fs,
 * memory, redis, db0, ...); values are stored as JSON. Its indexes are derived: the
 * records are the truth, and each entry is `indexEntryFor(key, value)`. With the cache
 * (sole writer) a scope's index is built once from its records and then kept with every
 * write; without it (a shared store) every list reads and sorts the scope's records.
 *
 * @example
 * ```ts
 * import { createStorage } from 'unstorage'
 * const store = unstorageStore(createStorage())
 * await store.set('profiles:usr_1:prof_1', { id: 'prof_1' })
 * ```
 */
export function unstorageStore(storage: Storage, opts: UnstorageStoreOptions = {}): Store {
  const max = opts.cacheEntries ?? 10_000
  const cache = opts.cache ? new LRUCache<string, NonNullable<unknown>>({ max }) : undefined
  const remember = (key: string, value: unknown) => {
    if (!cache) return
    // Store values are JSON: only a null (nothing stored) is no value to keep.
    if (value === null || value === undefined) cache.delete(key)
    else cache.set(key, value)
  }
  // Callers get copies, so nothing they do to a value can change the cached one.
  const copy = <T>(v: unknown): T => structuredClone(v) as T
  // With the cache (sole writer) every key is kept in memory too: unstorage's fs driver
  // walks the whole store on every getKeys whatever the base, which grows with every task.
  let index: Promise<Set<string>> | undefined
  const keyIndex = () => (index ??= storage.getKeys('').then((k) => new Set(k)))

  const scopes = new Map<string, Promise<OrderedIndexes>>()
  const scopeOf = (key: string) => key.slice(0, key.lastIndexOf(':'))
  const scopeKeys = async (scope: string) => {
    const keys = await storeKeys(`${scope}:`)
    return keys.filter((k) => k.lastIndexOf(':') === scope.length)
  }
  const build = async (scope: string) => {
    const ix = new OrderedIndexes()
    const keys = await scopeKeys(scope)
    const values = await self.getMany(keys)
    keys.forEach((k, i) => {
      const entry = values[i] === null ? null : indexEntryFor(k, values[i])
      if (entry?.scope === scope) ix.put(k, entry)
    })
    return ix
  }
  const indexOf = (scope: string) => {
    if (!cache) return build(scope)
    let ix = scopes.get(scope)
    if (!ix) {
      ix = build(scope)
      scopes.set(scope, ix)
    }
    return ix
  }
  const storeKeys = async (prefix: string) => {
    if (cache) return [...(await keyIndex())].filter((k) => k.startsWith(prefix))
    // unstorage normalises keys (":" separators); ask for the base, keep exact-prefix matches.
    const base = prefix.endsWith(':') ? prefix.slice(0, -1) : prefix
    const keys = await storage.getKeys(base)
    return keys.filter((k) => k.startsWith(prefix))
  }

  const self: Store = {
    async get<T>(key: string) {
      if (cache?.has(key)) return copy<T>(cache.get(key))
      const value = ((await storage.getItem(key)) as T | null) ?? null
      if (value !== null) remember(key, copy(value))
      return value
    },
    async getMany<T>(keys: string[]) {
      if (keys.length === 0) return []
      const missing = cache ? keys.filter((k) => !cache.has(k)) : keys
      const byKey = new Map<string, T | null>()
      if (missing.length) {
        for (const item of await storage.getItems(missing)) {
          byKey.set(item.key, (item.value as T | null) ?? null)
          if (item.value !== null && item.value !== undefined) remember(item.key, copy(item.value))
        }
      }
      return keys.map((k) => (byKey.has(k) ? byKey.get(k)! : cache?.has(k) ? copy<T>(cache.get(k)) : null))
    },
    async set<T>(key: string, value: T) {
      await storage.setItem(key, value as never)
      remember(key, copy(value))
      if (index) (await index).add(key)
      const ix = scopes.get(scopeOf(key))
      if (ix) (await ix).drop(key)
    },
    async remove(key: string) {
      await storage.removeItem(key)
      cache?.delete(key)
      if (index) (await index).delete(key)
      const ix = scopes.get(scopeOf(key))
      if (ix) (await ix).drop(key)
    },
    keys: storeKeys,
    async put<T>(key: string, value: T, entry: IndexEntry) {
      await storage.setItem(key, value as never)
      remember(key, copy(value))
      if (index) (await index).add(key)
      const ix = scopes.get(entry.scope)
      if (ix) (await ix).put(key, entry)
    },
    async list<T>(scope: string, query: IndexQuery) {
      const { keys, total } = (await indexOf(scope)).page(scope, query)
      const items = (await self.getMany<T>(keys)).filter((v): v is Awaited<T> => v !== null) as T[]
      return { items, total }
    },
    // The indexes are derived from the records: each entry is the one a list would give it.
    entries: () => derivedEntries(self),
  }
  return self
}
