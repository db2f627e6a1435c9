import { notFound } from '@berth/contract'
import type { Store } from '../ports/store.js'
import { indexEntryFor, listOrder } from './indexes.js'
import type { ReadCache } from './read-cache.js'

/** Fields every stored record has. `owner_id` is the caller that created it. */
export interface OwnedRecord {
  id: string
  owner_id: string
  created_at: string
  updated_at: string
}

/**
 * A page request: by number (1-based `page`, the default) or by key (`after`: the list
 * order of the previous page's last record, from a cursor), `limit` records.
 */
export interface Page {
  page?: number | undefined
  limit: number
  after?: string | undefined
}

/** A page of items with the total before paging, and where the next page starts (`null`: this is the last). */
export interface Paged<T> {
  items: T[]
  total: number
  next: string | null
}

/** How many records a numbered page skips (0 for a page by key). */
export function offsetOf(page: Page): number {
  return page.after === undefined ? ((page.page ?? 1) - 1) * page.limit : 0
}

/**
 * A page from up to `limit + 1` records read in list order: the extra one only tells
 * whether another page follows, so `next` is the order of the page's last record or null.
 *
 * @example
 * ```ts
 * pageFrom(['c', 'b', 'a'], 2, 3, (x) => x) // { items: ['c', 'b'], total: 3, next: 'b' }
 * ```
 */
export function pageFrom<T>(read: T[], limit: number, total: number, orderOf: (item: T) => string): Paged<T> {
  const items = read.slice(0, limit)
  return { items, total, next: read.length > limit && items.length > 0 ? orderOf(items[items.length - 1]!) : null }
}

/**
 * One page of an already ordered list (highest order first), with the total before paging:
 * by number, or (with `after`) from the first item whose order is below it.
 *
 * @example
 * ```ts
 * paginate(['c', 'b', 'a'], { page: 2, limit: 2 }, (x) => x) // { items: ['a'], total: 3, next: null }
 * paginate(['c', 'b', 'a'], { after: 'c', limit: 1 }, (x) => x) // { items: ['b'], total: 3, next: 'b' }
 * ```
 */
export function paginate<T>(all: readonly T[], page: Page, orderOf: (item: T) => string): Paged<T> {
  const after = page.after
  const below = after === undefined ? 0 : all.findIndex((item) => orderOf(item) < after)
  const start = (below < 0 ? all.length : below) + offsetOf(page)
  return pageFrom(all.slice(start, start + page.limit + 1), page.limit, all.length, orderOf)
}

/**
 * Records of one kind, keyed `<kind>:<owner>:<id>`. Because the owner is part of the key,
 * another caller's id simply does not exist for you: reads, updates and deletes of it are
 * the same 404 as an unknown id.
 *
 * @example
 * ```ts
 * const profiles = new OwnedCollection<ProfileRecord>(store, 'profiles', 'profile')
 * const p = await profiles.get(caller.id, 'prof_123') // throws 404 for another owner's id
 * ```
 */
export class OwnedCollection<T extends OwnedRecord> {
  constructor(
    private readonly store: Store,
    /** Key prefix, e.g. `profiles`. */
    readonly kind: string,
    /** Human label for error messages, e.g. `profile`. */
    readonly label: string,
    /** This instance's cache of views, for {@link view} (none: every view reads the store). */
    private readonly reads?: ReadCache,
  ) {}

  private key(owner: string, id: string): string {
    return `${this.kind}:${owner}:${id}`
  }

  /** The record, or `null` when absent or another owner's. */
  find(owner: string, id: string): Promise<T | null> {
    return this.store.get<T>(this.key(owner, id))
  }

  /** The record; 404 NOT_FOUND when absent or another owner's. */
  async get(owner: string, id: string): Promise<T> {
    const record = await this.find(owner, id)
    if (!record) throw notFound(this.label, id)
    return record
  }

  /**
   * The record's view made by `make` (the same function on every call), through the
   * instance's read cache when the collection has one; 404 NOT_FOUND as {@link get}. `final`
   * says the record will not be written again (see `ReadCache`).
   */
  async view<V>(owner: string, id: string, make: (record: T) => V, final?: (record: T) => boolean): Promise<V> {
    const key = this.key(owner, id)
    const view = this.reads
      ? await this.reads.view(key, () => this.store.get<T>(key), make, final)
      : await this.find(owner, id).then((r) => r && make(r))
    if (view === null) throw notFound(this.label, id)
    return view
  }

  /** Store the record and its place in the owner's ordered list (see `INDEXES`). */
  async put(record: T): Promise<T> {
    const key = this.key(record.owner_id, record.id)
    const entry = indexEntryFor(key, record)
    if (!entry) throw new Error(`${this.kind} is not a listed kind (see INDEXES)`)
    await this.store.put(key, record, entry)
    return record
  }

  /** Delete; 404 NOT_FOUND when absent (so a repeated DELETE is a 404). */
  async remove(owner: string, id: string): Promise<T> {
    const record = await this.get(owner, id)
    await this.store.remove(this.key(owner, id))
    return record
  }

  /** Every record of an owner, in list order (newest first). Reads them all: for small kinds. */
  async all(owner: string): Promise<T[]> {
    return (await this.store.list<T>(`${this.kind}:${owner}`, { offset: 0, limit: Number.MAX_SAFE_INTEGER })).items
  }

  /**
   * One page of an owner's records (newest first), optionally of one filter term (see
   * `INDEXES`, built with `term()`): reads the page's records and a kept count only; a
   * page by key (`after`) is an index range read at any depth.
   */
  async list(owner: string, page: Page, filter?: string): Promise<Paged<T>> {
    const { limit, after } = page
    const query = { term: filter, offset: offsetOf(page), limit: limit + 1, after }
    const { items, total } = await this.store.list<T>(`${this.kind}:${owner}`, query)
    return pageFrom(items, limit, total, (r) => listOrder(this.kind, r))
  }
}
