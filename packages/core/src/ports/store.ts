/**
 * Where a record sits in an ordered index: the index of `scope` (e.g. `tasks:<owner>`),
 * ordered by `order` (highest first: the list order, newest first), and one filtered index
 * per entry of `terms` (e.g. `status=running`), each read and counted on its own.
 */
export interface IndexEntry {
  /** The record's key without its last `:<id>` segment, e.g. `tasks:usr_1`. */
  scope: string
  /** Sort key, compared as plain (ASCII) strings; unique within the scope (end it with the id). */
  order: string
  /** Filter terms the record is listed under besides the whole scope. */
  terms?: string[]
}

/**
 * A page of one index: `term` picks a filtered index, otherwise the whole scope. With
 * `after` (keyset paging) the page starts below that `order`, a range read of the index
 * whatever its depth; `offset` then skips entries from there (usually 0).
 */
export interface IndexQuery {
  term?: string | undefined
  offset: number
  limit: number
  /** Only entries whose `order` is below this one (the last `order` of the previous page). */
  after?: string | undefined
}

/** One stored key as its driver holds it: the value and the index entry it was put with (null: set outside any index). */
export interface StoredEntry {
  key: string
  value: unknown
  index: IndexEntry | null
}

/**
 * Key/value persistence with ordered indexes. Keys are `:`-separated
 * (`profiles:<owner>:<id>`); values are JSON-serialisable records.
 *
 * Records of a list are written with {@link Store.put}, which keeps the record and its index
 * entries together (a crash leaves neither a listed record that is gone nor a stored record
 * that is not listed). `set` and `remove` drop a key's index entries, so a record can never
 * be listed with a value it no longer has. Drivers: see `@berth/server` (`sqliteStore`,
 * `memoryStore`, `redisStore`, `unstorageStore`); all pass `storeConformanceSuite` of
 * `@berth/testkit`.
 */
export interface Store {
  get<T>(key: string): Promise<T | null>
  /** Several keys in one call; missing keys are `null`, in input order. */
  getMany<T>(keys: string[]): Promise<(T | null)[]>
  /** Store a value outside any index (a key that had index entries loses them). */
  set<T>(key: string, value: T): Promise<void>
  /** Delete the value and its index entries. */
  remove(key: string): Promise<void>
  /** All keys that start with `prefix` (a `:`-terminated base), full keys returned. */
  keys(prefix: string): Promise<string[]>
  /** Store a record and (re)place it in its scope's ordered index, replacing its old entry. */
  put<T>(key: string, value: T, index: IndexEntry): Promise<void>
  /**
   * One page of an index, highest `order` first, and the number of entries in that index
   * (a count the driver keeps, not a scan). Reads only the page's own records; with
   * `after`, the page is an index range read (O(limit), not O(offset)).
   */
  list<T>(scope: string, query: IndexQuery): Promise<{ items: T[]; total: number }>
  /**
   * Every key with its value and index entry, in key order: read-only, for copying a store
   * into another (`migrate`). A store without it is copied with `indexEntryFor`.
   */
  entries?(): AsyncIterable<StoredEntry>
  /** Release files or connections the driver holds. */
  close?(): Promise<void>
  /** The driver's name for `/health` (`sqlite`, `postgres`, …). */
  readonly driver?: string
  /** Resolves when the backend answers (a cheap round trip); absent: always reachable (in-process). */
  ping?(): Promise<void>
}
