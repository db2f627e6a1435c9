/** Compacting a transcript: merging runs of small segments into larger ones, written before their parts are deleted. */
import type { TranscriptEvent } from '@berth/contract'
import type { Segment, SegmentStore } from './event-segments.js'

/** The log being compacted: its place in the store and its index (changed in place). */
export interface CompactedLog {
  owner: string
  ws: string
  /** Sorted by `first`, non-overlapping. */
  segments: Segment[]
}

/**
 * Runs of adjacent small segments (under half of `segmentEvents`) that compaction can
 * merge: two or more each, oldest first.
 */
function smallRuns(segments: Segment[], segmentEvents: number): Segment[][] {
  const runs: Segment[][] = []
  let run: Segment[] = []
  for (const seg of segments) {
    const small = seg.last - seg.first + 1 < segmentEvents / 2
    if (small && run.length && run[run.length - 1]!.last + 1 === seg.first) run.push(seg)
    else {
      if (run.length >= 2) runs.push(run)
      run = small ? [seg] : []
    }
  }
  if (run.length >= 2) runs.push(run)
  return runs
}

/**
 * How many segments compaction could merge now.
 *
 * @example
 * ```ts
 * mergeable(log.segments, 1000) >= 16 // time to compact
 * ```
 */
export function mergeable(segments: Segment[], segmentEvents: number): number {
  return smallRuns(segments, segmentEvents).reduce((n, run) => n + run.length, 0)
}

/**
 * Merge runs of small segments into segments of up to `segmentEvents`. Each merged
 * segment is written under its own new key before its parts are deleted, so a crash in
 * between leaves both and `recoverSegments` keeps whichever is intact.
 *
 * @example
 * ```ts
 * await compact(log, segmentStore, 1000) // log.segments now holds the merged ranges
 * ```
 */
export async function compact(log: CompactedLog, store: SegmentStore, segmentEvents: number): Promise<void> {
  const groups: Segment[][] = []
  for (const run of smallRuns(log.segments, segmentEvents)) {
    let group: Segment[] = []
    let size = 0
    for (const seg of run) {
      const n = seg.last - seg.first + 1
      if (group.length && size + n > segmentEvents) {
        groups.push(group)
        group = []
        size = 0
      }
      group.push(seg)
      size += n
    }
    groups.push(group)
  }
  for (const parts of groups) {
    if (parts.length < 2) continue
    const loaded = await Promise.all(parts.map((p) => store.load(p)))
    if (loaded.some((e) => e === null)) continue
    const events = (loaded as TranscriptEvent[][]).flat()
    const merged = await store.write(log.owner, log.ws, events)
    const at = log.segments.indexOf(parts[0]!)
    if (at < 0) continue
    log.segments.splice(at, parts.length, merged)
    for (const p of parts) await store.remove(p.key)
  }
}
