/** Opening a transcript after a crash: finish or undo an interrupted compaction, drop a torn newest segment. */
import type { Segment, SegmentStore } from './event-segments.js'

/**
 * The index of a log's segments, built from the stored keys: finish a compaction a crash
 * interrupted (keep the merged segment when intact, else its parts), drop a torn newest
 * segment. Reads only the newest segment and any unfinished compaction.
 *
 * @example
 * ```ts
 * const segments = await recoverSegments(store, 'usr_1', 'ws_1')
 * const count = segments.at(-1)?.last ?? 0 // continue after the last intact event
 * ```
 */
export async function recoverSegments(store: SegmentStore, owner: string, ws: string): Promise<Segment[]> {
  const found = await store.list(owner, ws)
  // Widest first among those starting at the same seq: a merged segment before its parts.
  found.sort((a, b) => a.first - b.first || b.last - a.last)
  const segments: Segment[] = []
  let covered = 0
  for (let i = 0; i < found.length; i++) {
    const seg = found[i]!
    if (seg.last <= covered) {
      // Inside a range already taken: a part whose compaction finished.
      await store.remove(seg.key)
      continue
    }
    // Sorted by `first`: the next one is the first that could start inside this one.
    const overlapsNext = (found[i + 1]?.first ?? Infinity) <= seg.last
    if (overlapsNext && !(await store.load(seg))) {
      // A merged segment the crash tore: its parts are still there.
      await store.remove(seg.key)
      continue
    }
    // A partial overlap (never written so, but harmless): readers skip what they have.
    segments.push(seg)
    covered = seg.last
  }
  // Only the segment being written when a crash hit can be torn: the newest one.
  while (segments.length) {
    const newest = segments[segments.length - 1]!
    if (await store.load(newest)) break
    await store.remove(newest.key)
    segments.pop()
  }
  return segments
}
