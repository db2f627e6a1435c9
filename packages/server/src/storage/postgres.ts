import type { IndexEntry, IndexQuery, StoredEntry } from '@berth/core'
import postgres from 'postgres'
import { idOf } from './ordered-index.js'
import { importRows, type ImportRow } from './postgres-import.js'
import { migrateSchema } from './postgres-schema.js'
import { postgresTls } from './postgres-tls.js'
import type { ClosableStore } from './sqlite.js'

/** Options of {@link postgresStore}. */
export interface PostgresStoreOptions {
  /** Connections in this instance's pool (default 10). */
  max?: number | undefined
  /** A schema to keep Berth's tables in (created when missing); default: the connection's search_path. */
  schema?: string | undefined
  /** A PEM file of the CA that signed the server's certificate (with `sslmode=require|verify-ca|verify-full`). */
  caFile?: string | undefined
}

/** The Postgres store: closable, it hands out its entries (for copying it elsewhere) and takes rows in bulk. */
export type PostgresStore = ClosableStore & {
  entries(): AsyncIterable<StoredEntry>
  /**
   * Write many keys in one transaction (`entry` null: outside any index), a few statements
   * per call instead of one per key; for filling a store no server writes to meanwhile.
   */
  importMany(rows: readonly ImportRow[]): Promise<void>
}

/** The upper bound of a prefix range: the prefix with its last character incremented. */
function after(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1)
}

// A deadlock (two writers of one scope's counts) or a serialization failure is retried:
// Postgres rolled the whole statement back, so running it again is safe.
const RETRYABLE = new Set(['40P01', '40001'])

/**
 * A store in PostgreSQL, the system of record for several instances (the `postgres`
 * client, one pool per store). Table `berth_kv` holds every value as JSON text,
 * `berth_index` one row per listed record and index (a btree on scope, term, order) and
 * `berth_index_counts` each index's size. Every write is one call of the `berth_write`
 * function, so a record, its index rows and the counts change in one transaction; a list
 * reads its count and one page in one statement. The schema is migrated on start
 * (`berth_migrations`, under an advisory lock: several instances may start at once).
 *
 * @example
 * ```ts
 * const store = await postgresStore('postgres://berth:secret@db.internal:5432/berth?sslmode=verify-full')
 * await store.list('tasks:usr_1', { term: 'status=running', offset: 0, limit: 20 })
 * await store.close()
 * ```
 */
export async function postgresStore(url: string, opts: PostgresStoreOptions = {}): Promise<PostgresStore> {
  if (opts.schema !== undefined && !/^[a-z_][a-z0-9_]{0,62}$/.test(opts.schema))
    throw new Error(`postgres: schema must be lower-case letters, digits and '_', got "${opts.schema}"`)
  const ssl = postgresTls(url, opts.caFile)
  const sql = postgres(url, {
    max: opts.max ?? 10,
    ...(ssl && { ssl }),
    onnotice: () => {},
    connection: { application_name: 'berth', ...(opts.schema && { search_path: opts.schema }) },
  })
  try {
    await migrateSchema(sql, opts.schema)
  } catch (err) {
    await sql.end({ timeout: 1 })
    throw err
  }

  const text = (key: string, value: unknown) => {
    if (value === undefined) throw new TypeError(`store: undefined value for ${key}`)
    return JSON.stringify(value)
  }
  // `text` null deletes the key.
  const write = async (key: string, text: string | null, entry: IndexEntry | null) => {
    const e = entry && { s: entry.scope, o: entry.order, i: idOf(key), t: ['', ...(entry.terms ?? [])] }
    for (let attempt = 0; ; attempt++) {
      try {
        await sql`SELECT berth_write(${key}, ${text}, ${e === null ? null : JSON.stringify(e)}::text::jsonb)`
        return
      } catch (err) {
        if (attempt >= 5 || !RETRYABLE.has((err as { code?: string }).code ?? '')) throw err
      }
    }
  }
  const parse = <T>(v: string | undefined): T | null => (v === undefined ? null : (JSON.parse(v) as T))

  return {
    async get<T>(key: string) {
      const [row] = await sql<{ value: string }[]>`SELECT value FROM berth_kv WHERE key = ${key}`
      return parse<T>(row?.value)
    },
    async getMany<T>(keys: string[]) {
      if (keys.length === 0) return []
      const rows = await sql<{ key: string; value: string }[]>`
        SELECT key, value FROM berth_kv WHERE key = ANY(${keys}::text[])`
      const byKey = new Map(rows.map((r) => [r.key, r.value]))
      return keys.map((k) => parse<T>(byKey.get(k)))
    },
    async set<T>(key: string, value: T) {
      await write(key, text(key, value), null)
    },
    async remove(key: string) {
      await write(key, null, null)
    },
    async keys(prefix: string) {
      const rows = prefix
        ? await sql<{ key: string }[]>`
            SELECT key FROM berth_kv WHERE key >= ${prefix} AND key < ${after(prefix)} ORDER BY key`
        : await sql<{ key: string }[]>`SELECT key FROM berth_kv ORDER BY key`
      return rows.map((r) => r.key)
    },
    async put<T>(key: string, value: T, entry: IndexEntry) {
      await write(key, text(key, value), entry)
    },
    async list<T>(scope: string, query: IndexQuery) {
      const term = query.term ?? ''
      // The count and the page in one statement: one round trip, one snapshot. The page's
      // ids come from the index alone (OFFSET skips index rows only), then their values;
      // with `after` the page starts at that order in the (scope, term, ord, id) key.
      const [row] = await sql<{ total: string; items: string[] }[]>`
        SELECT
          coalesce((SELECT n FROM berth_index_counts WHERE scope = ${scope} AND term = ${term}), 0) AS total,
          ARRAY(
            SELECT kv.value FROM (
              SELECT id, ord FROM berth_index WHERE scope = ${scope} AND term = ${term}
              ${query.after === undefined ? sql`` : sql`AND ord < ${query.after}`}
              ORDER BY ord DESC, id DESC LIMIT ${Math.max(0, query.limit)} OFFSET ${query.offset}
            ) p JOIN berth_kv kv ON kv.key = ${`${scope}:`} || p.id
            ORDER BY p.ord DESC, p.id DESC
          ) AS items`
      return { items: row!.items.map((v) => JSON.parse(v) as T), total: Number(row!.total) }
    },
    async *entries() {
      // Keyset pages in key order: constant memory, and no long-running transaction.
      for (let last: string | null = null; ; ) {
        type Row = { key: string; value: string; entry: string | null }
        const rows: Row[] =
          last === null
            ? await sql<Row[]>`SELECT key, value, entry::text AS entry FROM berth_kv ORDER BY key LIMIT 1000`
            : await sql<
                Row[]
              >`SELECT key, value, entry::text AS entry FROM berth_kv WHERE key > ${last} ORDER BY key LIMIT 1000`
        for (const r of rows) {
          const e = r.entry === null ? null : (JSON.parse(r.entry) as { s: string; o: string; t: string[] })
          yield {
            key: r.key,
            value: JSON.parse(r.value) as unknown,
            index: e && { scope: e.s, order: e.o, terms: e.t.filter((t) => t !== '') },
          }
        }
        if (rows.length < 1000) return
        last = rows[rows.length - 1]!.key
      }
    },
    importMany: (rows) => importRows(sql, rows),
    async close() {
      await sql.end({ timeout: 5 })
    },
    driver: 'postgres',
    async ping() {
      await sql`SELECT 1`
    },
  }
}
