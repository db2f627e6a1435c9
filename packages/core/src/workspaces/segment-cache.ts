/** Parsed transcript segments kept in memory, least recently used first, bounded by their event count. */
import { LRUCache } from 'lru-cache'
import type { TranscriptEvent } from '@berth/contract'

/**
 * Parsed segments by key, at most `maxEvents` events in all: setting one beyond evicts the
 * least recently used; a segment larger than the whole bound is not kept.
 *
 * @example
 * ```ts
 * const cache = segmentCache(100_000)
 * cache.set('eventlog:usr_1:ws_1:000000000001-000000000002', events)
 * cache.get('eventlog:usr_1:ws_1:000000000001-000000000002') // events
 * ```
 */
export function segmentCache(maxEvents: number): LRUCache<string, TranscriptEvent[]> {
  // lru-cache counts sizes as positive integers: an empty segment counts as one event.
  return new LRUCache<string, TranscriptEvent[]>({
    maxSize: maxEvents,
    sizeCalculation: (events) => events.length || 1,
  })
}
