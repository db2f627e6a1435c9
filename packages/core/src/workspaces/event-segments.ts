/**
 * The transcript's storage format: immutable segments, each written once under its own key
 * `eventlog:<owner>:<ws>:<first>-<last>` (both zero-padded) holding the events `first..last`.
 */
import type { Store } from '../ports/store.js'
import type { TranscriptEvent } from '@berth/contract'
import type { LRUCache } from 'lru-cache'
import { segmentCache } from './segment-cache.js'

/** Where a range of the log is stored. */
export interface Segment {
  first: number
  last: number
  key: string
}

/** What one stored key holds: the events `first..last`, all of them, in order. */
interface StoredSegment {
  first: number
  last: number
  events: TranscriptEvent[]
}

const KEY_DIGITS = 12
const pad = (n: number) => String(n).padStart(KEY_DIGITS, '0')
const SEGMENT_SUFFIX = new RegExp(`^(\\d{${KEY_DIGITS}})-(\\d{${KEY_DIGITS}})$`)

function isSegment(value: unknown, first: number, last: number): value is StoredSegment {
  if (typeof value !== 'object' || value === null) return false
  const s = value as Partial<StoredSegment>
  return (
    s.first === first &&
    s.last === last &&
    Array.isArray(s.events) &&
    s.events.length === last - first + 1 &&
    s.events[0]?.seq === first &&
    s.events[s.events.length - 1]?.seq === last
  )
}

/**
 * The segment holding `seq`, else the first one after it, else `undefined` (binary search
 * over segments sorted by `first`).
 *
 * @example
 * ```ts
 * findSegment([{ first: 1, last: 5, key: 'a' }, { first: 8, last: 9, key: 'b' }], 6) // the one at 8
 * ```
 */
export function findSegment(segments: Segment[], seq: number): Segment | undefined {
  let lo = 0
  let hi = segments.length - 1
  let after: Segment | undefined
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const s = segments[mid]!
    if (seq < s.first) {
      after = s
      hi = mid - 1
    } else if (seq > s.last) lo = mid + 1
    else return s
  }
  return after
}

/**
 * Segments through the {@link Store} port (so any unstorage driver works), with parsed
 * ones cached: list a log's segment keys, load one (checked intact), write one, remove.
 *
 * @example
 * ```ts
 * const segments = new SegmentStore(store, 100_000)
 * const seg = await segments.write('usr_1', 'ws_1', events) // events 1..n, one new key
 * await segments.load(seg) // the events, or null when torn
 * ```
 */
export class SegmentStore {
  private readonly cache: LRUCache<string, TranscriptEvent[]>

  constructor(
    private readonly store: Store,
    cacheEvents: number,
  ) {
    this.cache = segmentCache(cacheEvents)
  }

  private prefix(owner: string, ws: string): string {
    return `eventlog:${owner}:${ws}:`
  }

  /** Every segment key of a log, parsed (in the store's order; unrelated keys skipped). */
  async list(owner: string, ws: string): Promise<Segment[]> {
    const prefix = this.prefix(owner, ws)
    const found: Segment[] = []
    for (const key of await this.store.keys(prefix)) {
      const m = SEGMENT_SUFFIX.exec(key.slice(prefix.length))
      if (!m) continue
      const first = Number(m[1])
      const last = Number(m[2])
      if (first >= 1 && last >= first) found.push({ first, last, key })
    }
    return found
  }

  /** A segment's events, or `null` when it is missing or not intact (torn, foreign). */
  async load(seg: Segment): Promise<TranscriptEvent[] | null> {
    const cached = this.cache.get(seg.key)
    if (cached) return cached
    let value: unknown
    try {
      value = await this.store.get<unknown>(seg.key)
    } catch {
      return null
    }
    if (!isSegment(value, seg.first, seg.last)) return null
    this.cache.set(seg.key, value.events)
    return value.events
  }

  /** Write `events` (dense `seq`, oldest first) as one new segment under its own key. */
  async write(owner: string, ws: string, events: TranscriptEvent[]): Promise<Segment> {
    const first = events[0]!.seq
    const last = events[events.length - 1]!.seq
    const key = `${this.prefix(owner, ws)}${pad(first)}-${pad(last)}`
    await this.store.set<StoredSegment>(key, { first, last, events })
    this.cache.set(key, events)
    return { first, last, key }
  }

  /** Remove one key (failures ignored: a leftover is cleaned up when the log is next opened). */
  async remove(key: string): Promise<void> {
    this.cache.delete(key)
    await this.store.remove(key).catch(() => {})
  }

  /** Remove every key of a log. */
  async removeAll(owner: string, ws: string): Promise<void> {
    for (const key of await this.store.keys(this.prefix(owner, ws))) await this.remove(key)
  }
}
