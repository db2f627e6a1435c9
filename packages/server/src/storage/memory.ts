import type { IndexEntry, IndexQuery, Store, StoredEntry } from '@berth/core'
import { KeySpace } from './key-space.js'
import { OrderedIndexes } from './ordered-index.js'

/**
 * A store in this process's memory (gone on restart): for tests and embedding. Values are
 * kept as JSON text, so callers always get copies; lists read ordered indexes.
 *
 * @example
 * ```ts
 * const store = memoryStore()
 * await store.put('tasks:usr_1:task_1', task, indexEntryFor('tasks:usr_1:task_1', task)!)
 * await store.list('tasks:usr_1', { offset: 0, limit: 20 })
 * ```
 */
export function memoryStore(): Store & { bytes(): number; entries(): AsyncIterable<StoredEntry> } {
  const values = new Map<string, string>()
  const space = new KeySpace()
  const indexes = new OrderedIndexes()
  const parse = <T>(text: string | undefined): T | null => (text === undefined ? null : (JSON.parse(text) as T))
  const write = (key: string, value: unknown) => {
    if (value === undefined) throw new TypeError(`store: undefined value for ${key}`)
    if (!values.has(key)) space.add(key)
    values.set(key, JSON.stringify(value))
  }
  return {
    driver: 'memory',
    async get<T>(key: string) {
      return parse<T>(values.get(key))
    },
    async getMany<T>(keys: string[]) {
      return keys.map((k) => parse<T>(values.get(k)))
    },
    async set<T>(key: string, value: T) {
      write(key, value)
      indexes.drop(key)
    },
    async remove(key: string) {
      if (values.delete(key)) space.delete(key)
      indexes.drop(key)
    },
    async keys(prefix: string) {
      return space.match(prefix)
    },
    async put<T>(key: string, value: T, entry: IndexEntry) {
      write(key, value)
      indexes.put(key, entry)
    },
    async list<T>(scope: string, query: IndexQuery) {
      const { keys, total } = indexes.page(scope, query)
      return { items: keys.map((k) => parse<T>(values.get(k))!), total }
    },
    async *entries() {
      for (const key of space.match('')) {
        const entry = indexes.entry(key)
        yield { key, value: parse(values.get(key)), index: entry ? structuredClone(entry) : null }
      }
    },
    /** Bytes of the stored JSON (for the bench). */
    bytes() {
      let n = 0
      for (const [k, v] of values) n += k.length + v.length
      return n
    },
  }
}
