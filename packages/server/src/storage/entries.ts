import { indexEntryFor, type IndexEntry, type Store, type StoredEntry } from '@berth/core'
import { SEP } from './ordered-index.js'

/** The scope and terms of a record's index names (`<scope>␟<term>`, `<scope>␟` for the whole scope). */
export function entryFromNames(names: string[], order: string): IndexEntry {
  const scope = names[0]!.slice(0, names[0]!.indexOf(SEP))
  const terms = names.map((n) => n.slice(n.indexOf(SEP) + 1)).filter((t) => t !== '')
  return { scope, order, terms }
}

/**
 * Every key of a store with its value and the index entry the services would give it
 * (`indexEntryFor`), in key order, read in pages: for stores whose indexes are derived from
 * their records (unstorage) or that cannot tell their entries.
 */
export async function* derivedEntries(store: Store, page = 500): AsyncGenerator<StoredEntry> {
  const keys = (await store.keys('')).sort()
  for (let i = 0; i < keys.length; i += page) {
    const batch = keys.slice(i, i + page)
    const values = await store.getMany(batch)
    for (const [j, key] of batch.entries()) {
      const value = values[j]
      if (value === null || value === undefined) continue
      yield { key, value, index: indexEntryFor(key, value) }
    }
  }
}
