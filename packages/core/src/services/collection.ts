import { notFound } from '../errors.js'
import type { Store } from '../ports/store.js'

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

  async put(record: T): Promise<T> {
    await this.store.set(this.key(record.owner_id, record.id), record)
    return record
  }

  /** Delete; 404 NOT_FOUND when absent (so a repeated DELETE is a 404). */
  async remove(owner: string, id: string): Promise<T> {
    const record = await this.get(owner, id)
    await this.store.remove(this.key(owner, id))
    return record
  }

  /** Every record of an owner, newest first. */
  async all(owner: string): Promise<T[]> {
    const keys = await this.store.keys(`${this.kind}:${owner}:`)
    const records = (await this.store.getMany<T>(keys)).filter((r): r is T => r !== null)
    return records.sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1))
  }

  /** One page of an owner's records (newest first), optionally filtered. */
  async list(owner: string, page: Page, filter?: (r: T) => boolean): Promise<Paged<T>> {
    const all = await this.all(owner)
    return paginate(filter ? all.filter(filter) : all, page)
  }
}
