import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import type { IndexEntry, IndexQuery, Store, StoredEntry } from '@berth/core'
import Database from 'libsql'
import { entryFromNames } from './entries.js'
import { idOf, indexName, indexNames } from './ordered-index.js'

/** A store that can be closed (it holds a file or a connection). */
export type ClosableStore = Store & { close(): Promise<void> }

/** The SQLite store: also a synchronous bulk import (the migration) and its file. */
export type SqliteStore = ClosableStore & {
  path: string
  entries(): AsyncIterable<StoredEntry>
  /** Write many keys in one transaction (`entry` null: outside any index). */
  importSync(rows: { key: string; value: unknown; entry: IndexEntry | null }[]): void
}

// `kv.entry` is the record's index entry as JSON, `{ o: order, i: id, n: [index ids] }`
// (`ix_name` numbers the indexes: `<scope>␟<term>`, `<scope>␟` for the whole scope).
// Triggers keep `ix` (one row per record and index) and `ix_name.n` (each index's count)
// in step with it inside the writing statement itself: one statement per write, atomic.
const ADD = (e: string) => `
  INSERT INTO ix (nid, ord, id) SELECT value, ${e} ->> '$.o', ${e} ->> '$.i' FROM json_each(${e}, '$.n') WHERE ${e} IS NOT NULL;
  UPDATE ix_name SET n = n + 1 WHERE ${e} IS NOT NULL AND nid IN (SELECT value FROM json_each(${e}, '$.n'));`
const DROP = (e: string) => `
  DELETE FROM ix WHERE ${e} IS NOT NULL AND (nid, ord, id) IN (SELECT value, ${e} ->> '$.o', ${e} ->> '$.i' FROM json_each(${e}, '$.n'));
  UPDATE ix_name SET n = n - 1 WHERE ${e} IS NOT NULL AND nid IN (SELECT value FROM json_each(${e}, '$.n'));`
const SCHEMA = `
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, entry TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ix_name (nid INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ix (nid INTEGER NOT NULL, ord TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (nid, ord, id)) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS kv_index_insert AFTER INSERT ON kv WHEN NEW.entry IS NOT NULL BEGIN${ADD('NEW.entry')}
END;
CREATE TRIGGER IF NOT EXISTS kv_index_delete AFTER DELETE ON kv WHEN OLD.entry IS NOT NULL BEGIN${DROP('OLD.entry')}
END;
CREATE TRIGGER IF NOT EXISTS kv_index_update AFTER UPDATE OF entry ON kv WHEN OLD.entry IS NOT NEW.entry BEGIN${DROP('OLD.entry')}${ADD('NEW.entry')}
END;
`

/** The upper bound of a prefix range: the prefix with its last character incremented. */
function after(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1)
}

/**
 * The embedded default: one SQLite file (through `libsql`, prebuilt from npm) in WAL mode.
 * Table `kv` holds every value (and, for listed records, their index entry); `ix` holds
 * one row per record and index, ordered, and `ix_name` each index's count. A record and its
 * index rows change in one transaction, so a crash leaves both or neither.
 *
 * @example
 * ```ts
 * const store = sqliteStore('./.data/berth.db')
 * await store.put('tasks:usr_1:task_1', task, indexEntryFor('tasks:usr_1:task_1', task)!)
 * await store.list('tasks:usr_1', { term: 'status=running', offset: 0, limit: 20 })
 * await store.close()
 * ```
 */
export function sqliteStore(path: string): SqliteStore {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  const db = new Database(path)
  db.exec('PRAGMA journal_mode = WAL')
  // WAL + NORMAL: a commit is atomic and survives a process crash; only an OS crash or power
  // loss can roll back the last few commits (never corrupt the file).
  db.exec('PRAGMA synchronous = NORMAL')
  db.exec('PRAGMA busy_timeout = 5000')
  db.exec(SCHEMA)

  const q = {
    get: db.prepare('SELECT value FROM kv WHERE key = ?').raw(),
    upsert: db.prepare(
      'INSERT INTO kv (key, value, entry) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, entry = excluded.entry',
    ),
    del: db.prepare('DELETE FROM kv WHERE key = ?'),
    range: db.prepare('SELECT key FROM kv WHERE key >= ? AND key < ? ORDER BY key').raw(),
    name: db.prepare('SELECT nid, n FROM ix_name WHERE name = ?').raw(),
    addName: db.prepare('INSERT INTO ix_name (name, n) VALUES (?, 0) ON CONFLICT (name) DO NOTHING'),
    // The page's ids from the index alone (OFFSET skips index rows only), then their values.
    desc: db
      .prepare(
        'SELECT kv.value FROM (SELECT id, ord FROM ix WHERE nid = ? ORDER BY ord DESC, id DESC LIMIT ? OFFSET ?) p JOIN kv ON kv.key = ? || p.id ORDER BY p.ord DESC, p.id DESC',
      )
      .raw(),
    asc: db
      .prepare(
        'SELECT kv.value FROM (SELECT id, ord FROM ix WHERE nid = ? ORDER BY ord ASC, id ASC LIMIT ? OFFSET ?) p JOIN kv ON kv.key = ? || p.id ORDER BY p.ord ASC, p.id ASC',
      )
      .raw(),
    // Keyset: the page below a given order, a range read of the index's primary key.
    below: db
      .prepare(
        'SELECT kv.value FROM (SELECT id, ord FROM ix WHERE nid = ? AND ord < ? ORDER BY ord DESC, id DESC LIMIT ? OFFSET ?) p JOIN kv ON kv.key = ? || p.id ORDER BY p.ord DESC, p.id DESC',
      )
      .raw(),
  }
  // Rows come back raw (arrays): the first column of one row, or of every row.
  const one = (stmt: Database.Statement, ...args: unknown[]) => (stmt.get(...args) as unknown[] | undefined)?.[0]
  const col = (stmt: Database.Statement, ...args: unknown[]) => (stmt.all(...args) as unknown[][]).map((r) => r[0])
  // Index ids never change once given (names are never deleted), so they are cached.
  const nids = new Map<string, number>()
  const nidOf = (name: string): number => {
    let nid = nids.get(name)
    if (nid === undefined) {
      q.addName.run(name)
      nid = (q.name.get(name) as [number, number])[0]
      nids.set(name, nid)
    }
    return nid
  }
  const writeRow = (key: string, text: string, entry: IndexEntry | null) => {
    q.upsert.run(key, text, entry && JSON.stringify({ o: entry.order, i: idOf(key), n: indexNames(entry).map(nidOf) }))
  }
  const write = writeRow
  const remove = (key: string) => {
    q.del.run(key)
  }
  const text = (key: string, value: unknown) => {
    if (value === undefined) throw new TypeError(`store: undefined value for ${key}`)
    return JSON.stringify(value)
  }
  const read = <T>(key: string): T | null => {
    const v = one(q.get, key) as string | undefined
    return v === undefined ? null : (JSON.parse(v) as T)
  }

  const importMany = db.transaction((rows: { key: string; value: unknown; entry: IndexEntry | null }[]) => {
    for (const r of rows) writeRow(r.key, text(r.key, r.value), r.entry)
  }).immediate

  return {
    driver: 'sqlite',
    path,
    importSync: (rows) => importMany(rows),
    async get<T>(key: string) {
      return read<T>(key)
    },
    async getMany<T>(keys: string[]) {
      return keys.map((k) => read<T>(k))
    },
    async set<T>(key: string, value: T) {
      write(key, text(key, value), null)
    },
    async remove(key: string) {
      remove(key)
    },
    async keys(prefix: string) {
      if (!prefix) return col(db.prepare('SELECT key FROM kv ORDER BY key').raw()) as string[]
      return col(q.range, prefix, after(prefix)) as string[]
    },
    async put<T>(key: string, value: T, entry: IndexEntry) {
      write(key, text(key, value), entry)
    },
    async list<T>(scope: string, query: IndexQuery) {
      const row = q.name.get(indexName(scope, query.term)) as [number, number] | undefined
      const total = row?.[1] ?? 0
      if (!row || query.offset >= total || query.limit <= 0) return { items: [], total }
      if (query.after !== undefined) {
        const values = col(q.below, row[0], query.after, query.limit, query.offset, `${scope}:`) as string[]
        return { items: values.map((v) => JSON.parse(v) as T), total }
      }
      const limit = Math.min(query.limit, total - query.offset)
      // OFFSET steps through the index: walk from whichever end is nearer.
      const values =
        query.offset <= total - query.offset - limit
          ? (col(q.desc, row[0], limit, query.offset, `${scope}:`) as string[])
          : (col(q.asc, row[0], limit, total - query.offset - limit, `${scope}:`) as string[]).reverse()
      return { items: values.map((v) => JSON.parse(v) as T), total }
    },
    async *entries() {
      const names = new Map(
        (db.prepare('SELECT nid, name FROM ix_name').raw().all() as [number, string][]).map(([nid, name]) => [
          nid,
          name,
        ]),
      )
      const page = db.prepare('SELECT key, value, entry FROM kv WHERE key > ? ORDER BY key LIMIT 1000').raw()
      // Keyset pages in key order; '' sorts before every key.
      for (let last = ''; ; ) {
        const rows = page.all(last) as [string, string, string | null][]
        for (const [key, value, entry] of rows) {
          const e = entry === null ? null : (JSON.parse(entry) as { o: string; n: number[] })
          yield {
            key,
            value: JSON.parse(value) as unknown,
            index:
              e &&
              entryFromNames(
                e.n.map((nid) => names.get(nid)!),
                e.o,
              ),
          }
        }
        if (rows.length < 1000) return
        last = rows[rows.length - 1]![0]
      }
    },
    async close() {
      // Fold the write-ahead log into the file, so a closed store is one file of its real size.
      db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
      db.close()
    },
  }
}
