import type { IndexEntry } from '@berth/core'
import type { Sql } from 'postgres'
import { idOf } from './ordered-index.js'

/** One key of a bulk import: `entry` null stores the value outside any index. */
export interface ImportRow {
  key: string
  value: unknown
  entry: IndexEntry | null
}

/** The stored form of an index entry (as `berth_write` keeps it): the whole scope is the term ''. */
interface StoredIndexEntry {
  s: string
  o: string
  i: string
  t: string[]
}

const stored = (key: string, entry: IndexEntry): StoredIndexEntry => ({
  s: entry.scope,
  o: entry.order,
  i: idOf(key),
  t: ['', ...(entry.terms ?? [])],
})

/** Index rows as four parallel columns, the shape `unnest` takes them in. */
class IndexRows {
  readonly scope: string[] = []
  readonly term: string[] = []
  readonly ord: string[] = []
  readonly id: string[] = []
  add(e: StoredIndexEntry) {
    for (const t of e.t) {
      this.scope.push(e.s)
      this.term.push(t)
      this.ord.push(e.o)
      this.id.push(e.i)
    }
  }
}

/**
 * Write many keys in one transaction, a handful of statements whatever their number: the
 * values, their index rows and the counts' differences each go in as arrays (`unnest`)
 * instead of one `berth_write` call per key. Keys already stored are replaced (their old
 * index rows leave first). It takes no per-key advisory lock, so it is meant for filling a
 * store no server writes to at the same time (a migration, a benchmark's seed).
 */
export async function importRows(sql: Sql, rows: readonly ImportRow[]): Promise<void> {
  // The last row of a key wins, as if the rows had been written one after the other.
  const byKey = new Map<string, ImportRow>()
  for (const r of rows) {
    if (r.value === undefined) throw new TypeError(`store: undefined value for ${r.key}`)
    byKey.set(r.key, r)
  }
  if (byKey.size === 0) return
  const keys = [...byKey.keys()]
  const values = keys.map((k) => JSON.stringify(byKey.get(k)!.value))
  const entries = keys.map((k) => {
    const e = byKey.get(k)!.entry
    return e && stored(k, e)
  })
  await sql.begin(async (tx) => {
    const old = await tx<{ entry: string }[]>`
      SELECT entry::text AS entry FROM berth_kv
      WHERE key = ANY(${keys}::text[]) AND entry IS NOT NULL ORDER BY key FOR UPDATE`
    const counts = new Map<string, { scope: string; term: string; n: number }>()
    const count = (rows: IndexRows, delta: number) => {
      for (let i = 0; i < rows.scope.length; i++) {
        const k = `${rows.scope[i]}\u0000${rows.term[i]}`
        const c = counts.get(k) ?? { scope: rows.scope[i]!, term: rows.term[i]!, n: 0 }
        c.n += delta
        counts.set(k, c)
      }
    }
    if (old.length > 0) {
      const gone = new IndexRows()
      for (const r of old) gone.add(JSON.parse(r.entry) as StoredIndexEntry)
      await tx`
        DELETE FROM berth_index i
        USING unnest(${gone.scope}::text[], ${gone.term}::text[], ${gone.ord}::text[], ${gone.id}::text[])
          AS d(scope, term, ord, id)
        WHERE i.scope = d.scope AND i.term = d.term AND i.ord = d.ord AND i.id = d.id`
      count(gone, -1)
    }
    const texts = entries.map((e) => (e === null ? null : JSON.stringify(e)))
    await tx`
      INSERT INTO berth_kv AS kv (key, value, entry)
      SELECT k, v, e::jsonb FROM unnest(${keys}::text[], ${values}::text[], ${texts as string[]}::text[]) AS r(k, v, e)
      ON CONFLICT (key) DO UPDATE SET value = excluded.value, entry = excluded.entry`
    const added = new IndexRows()
    for (const e of entries) if (e) added.add(e)
    if (added.scope.length > 0) {
      await tx`
        INSERT INTO berth_index (scope, term, ord, id)
        SELECT * FROM unnest(${added.scope}::text[], ${added.term}::text[], ${added.ord}::text[], ${added.id}::text[])`
      count(added, 1)
    }
    // In (scope, term) order, as berth_write changes them, so concurrent writers never deadlock.
    const changed = [...counts.values()]
      .filter((c) => c.n !== 0)
      .sort((a, b) => (a.scope === b.scope ? cmp(a.term, b.term) : cmp(a.scope, b.scope)))
    if (changed.length > 0) {
      await tx`
        INSERT INTO berth_index_counts AS c (scope, term, n)
        SELECT * FROM unnest(${changed.map((c) => c.scope)}::text[], ${changed.map((c) => c.term)}::text[],
          ${changed.map((c) => String(c.n))}::bigint[])
        ON CONFLICT (scope, term) DO UPDATE SET n = c.n + excluded.n`
    }
  })
}

// Byte order, as `COLLATE "C"` compares (JavaScript's < compares UTF-16 units: the same for ASCII keys).
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)
