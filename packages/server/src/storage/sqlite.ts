import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import type { IndexEntry, IndexQuery, Store } from '@berth/core'
import Database from 'libsql'
import { idOf, indexNames, indexName } from './ordered-index.js'

/** A store that can be closed (it holds a file or a connection). */
export type ClosableStore = Store & { close(): Promise<void> }

/** The SQLite store: also a synchronous bulk import (the migration) and its file. */
export type SqliteStore = ClosableStore & {
  path: string
  /** Write many keys in one transaction (`entry` null: outside any index). */
  importSync(rows: { key: string; value: unknown; entry: IndexEntry | null }[]): void
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, entry TEXT) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ix_name (nid INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, n INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ix (nid INTEGER NOT NULL, ord TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (nid, ord, id)) WITHOUT ROWID;
`

/** The upper bound of a prefix range: the prefix with its last character incremented. */
function after(prefix: string): string {
  return prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1)
}

type Row = { entry: string | null }
type StoredEntry = [scope: string, order: string, terms: string[]]

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
    entry: db.prepare('SELECT entry FROM kv WHERE key = ?'),
    upsert: db.prepare('INSERT INTO kv (key, value, entry) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, entry = excluded.entry'),
    del: db.prepare('DELETE FROM kv WHERE key = ?'),
    range: db.prepare('SELECT key FROM kv WHERE key >= ? AND key < ? ORDER BY key').raw(),
    nid: db.prepare('SELECT nid FROM ix_name WHERE name = ?').raw(),
    addName: db.prepare('INSERT INTO ix_name (name, n) VALUES (?, 0)'),
    count: db.prepare('SELECT n FROM ix_name WHERE name = ?').raw(),
    bump: db.prepare('UPDATE ix_name SET n = n + ? WHERE nid = ?'),
    ixAdd: db.prepare('INSERT INTO ix (nid, ord, id) VALUES (?, ?, ?)'),
    ixDel: db.prepare('DELETE FROM ix WHERE nid = ? AND ord = ? AND id = ?'),
    desc: db.prepare('SELECT id FROM ix WHERE nid = ? ORDER BY ord DESC, id DESC LIMIT ? OFFSET ?').raw(),
    asc: db.prepare('SELECT id FROM ix WHERE nid = ? ORDER BY ord ASC, id ASC LIMIT ? OFFSET ?').raw(),
  }
  // Rows come back raw (arrays): the first column of one row, or of every row.
  const one = (stmt: Database.Statement, ...args: unknown[]) => (stmt.get(...args) as unknown[] | undefined)?.[0]
  const col = (stmt: Database.Statement, ...args: unknown[]) => (stmt.all(...args) as unknown[][]).map((r) => r[0])
  const nids = new Map<string, number>()
  const nidOf = (name: string, create: boolean): number | undefined => {
    let nid = nids.get(name) ?? (one(q.nid, name) as number | undefined)
    if (nid === undefined && create) nid = Number(q.addName.run(name).lastInsertRowid)
    if (nid !== undefined) nids.set(name, nid)
    return nid
  }
  const unindex = (key: string, stored: StoredEntry) => {
    for (const name of indexNames({ scope: stored[0], order: stored[1], terms: stored[2] })) {
      const nid = nidOf(name, false)
      if (nid !== undefined && q.ixDel.run(nid, stored[1], idOf(key)).changes > 0) q.bump.run(-1, nid)
    }
  }
  const index = (key: string, e: IndexEntry) => {
    for (const name of indexNames(e)) {
      const nid = nidOf(name, true)!
      q.ixAdd.run(nid, e.order, idOf(key))
      q.bump.run(1, nid)
    }
  }
  const writeRow = (key: string, text: string, entry: IndexEntry | null) => {
    const row = q.entry.get(key) as Row | undefined
    const next = entry && JSON.stringify([entry.scope, entry.order, entry.terms ?? []] satisfies StoredEntry)
    if (row?.entry !== next) {
      if (row?.entry) unindex(key, JSON.parse(row.entry) as StoredEntry)
      if (entry) index(key, entry)
    }
    q.upsert.run(key, text, next)
  }
  // IMMEDIATE: take the write lock up front, so another process's writer waits (busy_timeout).
  const write = db.transaction(writeRow).immediate
  const remove = db.transaction((key: string) => {
    const row = q.entry.get(key) as Row | undefined
    if (row?.entry) unindex(key, JSON.parse(row.entry) as StoredEntry)
    q.del.run(key)
  }).immediate
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
      const name = indexName(scope, query.term)
      const total = (one(q.count, name) as number | undefined) ?? 0
      const nid = nidOf(name, false)
      if (nid === undefined || query.offset >= total || query.limit <= 0) return { items: [], total }
      const limit = Math.min(query.limit, total - query.offset)
      // OFFSET steps through the index: walk from whichever end is nearer.
      const ids =
        query.offset <= total - query.offset - limit
          ? (col(q.desc, nid, limit, query.offset) as string[])
          : (col(q.asc, nid, limit, total - query.offset - limit) as string[]).reverse()
      return { items: ids.map((id) => read<T>(`${scope}:${id}`)!).filter((v) => v !== null), total }
    },
    async close() {
      db.close()
    },
  }
}
