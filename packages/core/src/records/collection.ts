import { notFound } from '@berth/contract'
import type { Store } from '../ports/store.js'
import { indexEntryFor } from './indexes.js'

/** Fields every stored record has. `owner_id` is the caller that created it. */
export interface OwnedRecord {
  id: string
  owner_id: string
  created_at: string
  updated_at: string
}

/** A page request (1-based). */
export interface Page {
  page: number
  limit: number
}

/** A page of items with the total before paging. */
export interface Paged<T> {
  items: T[]
  total: number
}

/**
 * One page of an already ordered list, with the total before paging.
 *
 * @example
 * ```ts
 * paginate(['a', 'b', 'c'], { page: 2, limit: 2 }) // { items: ['c'], total: 3 }
 * ```
 */
export function paginate<T>(all: readonly T[], page: Page): Paged<T> {
  const start = (page.page - 1) * page.limit
  return { items: all.slice(start, start + page.limit), total: all.length }
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
   * `INDEXES`, built with `term()`): reads the page's records and a kept count only.
   */
  async list(owner: string, page: Page, filter?: string): Promise<Paged<T>> {
    const limit = page.limit
    return this.store.list<T>(`${this.kind}:${owner}`, { term: filter, offset: (page.page - 1) * limit, limit })
  }
}
