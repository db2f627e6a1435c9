/** Parsed transcript segments kept in memory, least recently used first, bounded by their event count. */
import type { TranscriptEvent } from '@berth/contract'

/**
 * Parsed segments by key; putting one beyond `max` events evicts the least recently used.
 *
 * @example
 * ```ts
 * const cache = new SegmentCache(100_000)
 * cache.put('eventlog:usr_1:ws_1:000000000001-000000000002', events)
 * cache.get('eventlog:usr_1:ws_1:000000000001-000000000002') // events
 * ```
 */
export class SegmentCache {
  private readonly map = new Map<string, TranscriptEvent[]>()
  private size = 0

  constructor(private readonly max: number) {}

  get(key: string): TranscriptEvent[] | undefined {
    const events = this.map.get(key)
    if (events) {
      this.map.delete(key)
      this.map.set(key, events)
    }
    return events
  }

  put(key: string, events: TranscriptEvent[]): void {
    this.drop(key)
    if (events.length > this.max) return
    this.map.set(key, events)
    this.size += events.length
    for (const [k, v] of this.map) {
      if (this.size <= this.max) break
      this.map.delete(k)
      this.size -= v.length
    }
  }

  drop(key: string): void {
    const old = this.map.get(key)
    if (!old) return
    this.map.delete(key)
    this.size -= old.length
  }
}
