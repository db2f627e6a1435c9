import type { IndexEntry, IndexQuery } from '@berth/core'

/** Separates a scope from a term, and an order from an id: below every printable character. */
export const SEP = '\u001f'

/** The name of one index: the whole scope (`term` absent) or one filtered index of it. */
export function indexName(scope: string, term?: string): string {
  return `${scope}${SEP}${term ?? ''}`
}

/** Every index a record is listed in. */
export function indexNames(entry: IndexEntry): string[] {
  return [indexName(entry.scope), ...(entry.terms ?? []).map((t) => indexName(entry.scope, t))]
}

/** The id: a key's last `:` segment. */
export function idOf(key: string): string {
  return key.slice(key.lastIndexOf(':') + 1)
}

function lowerBound(arr: string[], member: string): number {
  let lo = 0
  let hi = arr.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (arr[mid]! < member) lo = mid + 1
    else hi = mid
  }
  return lo
}

/**
 * Ordered indexes in memory: per index name a sorted array of `order␟id` members. New
 * records (time-ordered) append at the end, so inserts stay cheap; a page is a slice.
 *
 * @example
 * ```ts
 * const ix = new OrderedIndexes()
 * ix.put('tasks:u:t1', { scope: 'tasks:u', order: '2026…|t1', terms: ['status=queued'] })
 * ix.page({ scope: 'tasks:u', offset: 0, limit: 20 }) // { keys: ['tasks:u:t1'], total: 1 }
 * ```
 */
export class OrderedIndexes {
  private readonly lists = new Map<string, string[]>()
  private readonly entries = new Map<string, IndexEntry>()

  put(key: string, entry: IndexEntry): void {
    this.drop(key)
    const member = `${entry.order}${SEP}${idOf(key)}`
    for (const name of indexNames(entry)) {
      let arr = this.lists.get(name)
      if (!arr) {
        arr = []
        this.lists.set(name, arr)
      }
      if (arr.length === 0 || arr[arr.length - 1]! < member) arr.push(member)
      else arr.splice(lowerBound(arr, member), 0, member)
    }
    this.entries.set(key, { scope: entry.scope, order: entry.order, terms: [...(entry.terms ?? [])] })
  }

  /** The entry `key` is listed with, if any. */
  entry(key: string): IndexEntry | undefined {
    return this.entries.get(key)
  }

  drop(key: string): void {
    const old = this.entries.get(key)
    if (!old) return
    this.entries.delete(key)
    const member = `${old.order}${SEP}${idOf(key)}`
    for (const name of indexNames(old)) {
      const arr = this.lists.get(name)
      if (!arr) continue
      const at = lowerBound(arr, member)
      if (arr[at] === member) arr.splice(at, 1)
      if (arr.length === 0) this.lists.delete(name)
    }
  }

  /** Keys of one page, highest order first, and the index's size. */
  page(scope: string, q: IndexQuery): { keys: string[]; total: number } {
    const arr = this.lists.get(indexName(scope, q.term)) ?? []
    const keys: string[] = []
    // Members are `order␟id` and `␟` sorts below every printable character, so the members
    // below `after` are exactly those whose order is below it.
    const top = q.after === undefined ? arr.length : lowerBound(arr, q.after)
    const from = top - 1 - q.offset
    for (let i = from; i >= 0 && keys.length < q.limit; i--) {
      const m = arr[i]!
      keys.push(`${scope}:${m.slice(m.lastIndexOf(SEP) + 1)}`)
    }
    return { keys, total: arr.length }
  }
}
