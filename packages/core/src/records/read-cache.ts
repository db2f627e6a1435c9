import type { IndexEntry, Store } from '../ports/store.js'

/** What {@link ReadCache} is built with. */
export interface ReadCacheOptions {
  /**
   * Other instances write to the same store (a shared coordination): a view is kept only
   * when its record is final (see {@link ReadCache.view}).
   */
  shared: boolean
  /** The views' size at most, in bytes of their JSON (default 16 MiB); 0 keeps none. */
  maxBytes?: number | undefined
}

interface Entry {
  view: unknown
  make: unknown
  bytes: number
}

/** Default {@link ReadCacheOptions.maxBytes}. */
export const DEFAULT_READ_CACHE_BYTES = 16 * 1024 * 1024

/**
 * API views of stored records kept in this instance's memory, so that the reads callers
 * repeat (a task polled until it ends, a workspace, a session) cost no store read, no parse
 * and no view. It never answers a view its record no longer has:
 *
 * - Every write of a key through the store the services write through ({@link watch})
 *   forgets the key when the write starts and again once it has settled, and a read that was
 *   under way across a write does not keep its answer: on one instance, the read after a
 *   write reads the store.
 * - With several instances (`shared`), another instance may write any record without this
 *   one hearing of it in time: only views of records that are final (no instance writes them
 *   again, e.g. a task that ended) are kept; the others are read from the store every time.
 *
 * The views are frozen (every reader gets the same object) and their JSON size is bounded
 * (`maxBytes`); the oldest go first.
 *
 * @example
 * ```ts
 * const reads = new ReadCache({ shared: false })
 * const store = reads.watch(sqliteStore(path)) // every service writes through this one
 * const view = await reads.view(key, () => store.get<TaskRecord>(key), taskView)
 * ```
 */
export class ReadCache {
  private readonly entries = new Map<string, Entry>()
  /** Reads under way, by key: a write forgets the key's token, and a read whose token is gone keeps nothing. */
  private readonly loading = new Map<string, object>()
  private readonly maxBytes: number
  private bytes = 0

  constructor(private readonly o: ReadCacheOptions) {
    this.maxBytes = o.maxBytes ?? DEFAULT_READ_CACHE_BYTES
  }

  /**
   * The view of the record at `key`, made by `make` (kept with it: pass the same function
   * every time), or null when there is none. `final` says that the record will not be
   * written again; with several instances only those views are kept.
   */
  async view<R, V>(
    key: string,
    load: () => Promise<R | null>,
    make: (record: R) => V,
    final?: (record: R) => boolean,
  ): Promise<V | null> {
    const hit = this.entries.get(key)
    if (hit?.make === make) return hit.view as V
    if (this.maxBytes <= 0) {
      const record = await load()
      return record === null ? null : make(record)
    }
    const token = {}
    this.loading.set(key, token)
    let record: R | null
    let current = false
    try {
      record = await load()
    } finally {
      // Still ours: no write forgot the key and no later read of it began meanwhile.
      current = this.loading.get(key) === token
      if (current) this.loading.delete(key)
    }
    if (record === null) return null
    const view = make(record)
    if (current && (!this.o.shared || final?.(record))) this.keep(key, make, view)
    return view
  }

  /** Forget `key` (its record was written or removed). */
  forget(key: string): void {
    this.loading.delete(key)
    const e = this.entries.get(key)
    if (!e) return
    this.entries.delete(key)
    this.bytes -= e.bytes
  }

  /**
   * `store` with every write (`set`, `put`, `remove`) forgetting its key in this cache, before
   * the write starts and once it has settled: give the services this store.
   */
  watch(store: Store): Store {
    const settled = async (key: string, write: () => Promise<void>) => {
      this.forget(key)
      try {
        await write()
      } finally {
        this.forget(key)
      }
    }
    const watched: Store = {
      get: (key) => store.get(key),
      getMany: (keys) => store.getMany(keys),
      keys: (prefix) => store.keys(prefix),
      list: (scope, query) => store.list(scope, query),
      set: <T>(key: string, value: T) => settled(key, () => store.set(key, value)),
      put: <T>(key: string, value: T, index: IndexEntry) => settled(key, () => store.put(key, value, index)),
      remove: (key) => settled(key, () => store.remove(key)),
    }
    if (store.entries) watched.entries = () => store.entries!()
    if (store.close) watched.close = () => store.close!()
    if (store.ping) watched.ping = () => store.ping!()
    if (store.driver !== undefined) Object.assign(watched, { driver: store.driver })
    return watched
  }

  private keep(key: string, make: unknown, view: unknown): void {
    const bytes = JSON.stringify(view)?.length ?? 0
    // One view may take a sixteenth of the budget at most: a huge result is read from the store.
    if (bytes > this.maxBytes / 16) return
    this.forget(key)
    this.entries.set(key, { view: Object.freeze(view), make, bytes })
    this.bytes += bytes
    for (const [k] of this.entries) {
      if (this.bytes <= this.maxBytes) break
      this.forget(k)
    }
  }
}
