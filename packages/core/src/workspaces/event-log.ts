import { KeyedMutex } from '../internal/mutex.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { TranscriptEvent } from '../schemas/task.js'

/** An event before it has a place in the log. */
export type NewEvent = { type: TranscriptEvent['type']; task_id: string } & Record<string, unknown>

/** What one stored key holds: the events `first..last`, all of them, in order. */
interface StoredSegment {
  first: number
  last: number
  events: TranscriptEvent[]
}

/** Where a range of the log is stored. */
interface Segment {
  first: number
  last: number
  key: string
}

/** One open log: the index of its segments and what is not written yet. */
interface Log {
  owner: string
  ws: string
  /** Sorted by `first`, non-overlapping; gaps only where stored data was lost. */
  segments: Segment[]
  /** The last `seq` handed out. */
  count: number
  /** Events not written yet, in `seq` order, all above every stored one. */
  pending: TranscriptEvent[]
  flushTimer: ReturnType<typeof setTimeout> | null
  idleTimer: ReturnType<typeof setTimeout> | null
}

export interface EventLogOptions {
  /** How long appends are buffered before they are written (default 50 ms). */
  flushMs?: number
  /** Events per compacted segment, and at most per written segment (default 1000). */
  segmentEvents?: number
  /** Compact once this many small segments could be merged (default 16). */
  compactAfter?: number
  /** Compact what can be merged once the log had no flush for this long (default 2 s). */
  idleMs?: number
  /** Parsed segments kept in memory, counted in events (default 100,000). */
  cacheEvents?: number
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

/** Parsed segments by key, least recently used first, bounded by their event count. */
class SegmentCache {
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

/**
 * The append-only event log of each workspace (its transcript): dense `seq` from 1.
 *
 * Storage: immutable segments, each written once under its own key
 * `eventlog:<owner>:<ws>:<first>-<last>` (both zero-padded) holding the events
 * `first..last`. A flush writes the buffered events as a new segment; nothing stored is
 * ever rewritten in place, so a crash mid-write can only tear the segment being written,
 * never an earlier one. Small segments are compacted into larger ones (up to
 * `segmentEvents`) once `compactAfter` of them can be merged or the log has been idle
 * for `idleMs`: the merged segment is written under a new key first, then the parts are
 * deleted, so a crash in between leaves both, and opening the log keeps whichever is
 * intact. Everything goes through the {@link Store} port, so any unstorage driver works.
 *
 * An open log keeps an index of its segment ranges in memory (built from the key names
 * when first opened, reading only the newest segment and any unfinished compaction), so
 * a read `after=N` fetches just the segments it needs; parsed segments are cached.
 * Appends are buffered for `flushMs` (token deltas come in bursts); reads see buffered
 * events too. Until a flush, the runner's own event file in the workspace is the durable
 * copy. One process writes a given log (the in-memory index is the source of `seq`).
 *
 * @example
 * ```ts
 * const log = new EventLog(store, clock)
 * const [e] = await log.append('usr_1', 'ws_1', [{ type: 'token', task_id: 'task_1', text: 'Hi' }])
 * e.seq // 1
 * ```
 */
export class EventLog {
  private readonly logs = new Map<string, Log>()
  private readonly opening = new Map<string, Promise<Log>>()
  private readonly lock = new KeyedMutex()
  private readonly cache: SegmentCache
  private readonly flushMs: number
  private readonly segmentEvents: number
  private readonly compactAfter: number
  private readonly idleMs: number

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    opts: EventLogOptions = {},
  ) {
    this.flushMs = opts.flushMs ?? 50
    this.segmentEvents = Math.max(1, opts.segmentEvents ?? 1000)
    this.compactAfter = Math.max(2, opts.compactAfter ?? 16)
    this.idleMs = opts.idleMs ?? 2000
    this.cache = new SegmentCache(opts.cacheEvents ?? 100_000)
  }

  private prefix(owner: string, ws: string): string {
    return `eventlog:${owner}:${ws}:`
  }

  private segmentKey(owner: string, ws: string, first: number, last: number): string {
    return `${this.prefix(owner, ws)}${pad(first)}-${pad(last)}`
  }

  /** A segment's events, or `null` when it is missing or not intact (torn, foreign). */
  private async load(seg: Segment): Promise<TranscriptEvent[] | null> {
    const cached = this.cache.get(seg.key)
    if (cached) return cached
    let value: unknown
    try {
      value = await this.store.get<unknown>(seg.key)
    } catch {
      return null
    }
    if (!isSegment(value, seg.first, seg.last)) return null
    this.cache.put(seg.key, value.events)
    return value.events
  }

  private async removeKey(key: string): Promise<void> {
    this.cache.drop(key)
    await this.store.remove(key).catch(() => {})
  }

  /** The open log of a workspace, opening it from the store the first time. */
  private open(owner: string, ws: string): Promise<Log> {
    const id = `${owner}:${ws}`
    const log = this.logs.get(id)
    if (log) return Promise.resolve(log)
    let opening = this.opening.get(id)
    if (!opening) {
      opening = this.lock
        .run(id, async () => this.logs.get(id) ?? this.recover(owner, ws))
        .then((l) => {
          this.logs.set(id, l)
          return l
        })
        .finally(() => this.opening.delete(id))
      this.opening.set(id, opening)
    }
    return opening
  }

  /**
   * Build the index from the stored keys: finish a compaction a crash interrupted (keep
   * the merged segment when intact, else its parts), drop a torn newest segment, and
   * continue after the last intact event.
   */
  private async recover(owner: string, ws: string): Promise<Log> {
    const prefix = this.prefix(owner, ws)
    const found: Segment[] = []
    for (const key of await this.store.keys(prefix)) {
      const m = SEGMENT_SUFFIX.exec(key.slice(prefix.length))
      if (!m) continue
      const first = Number(m[1])
      const last = Number(m[2])
      if (first >= 1 && last >= first) found.push({ first, last, key })
    }
    // Widest first among those starting at the same seq: a merged segment before its parts.
    found.sort((a, b) => a.first - b.first || b.last - a.last)
    const segments: Segment[] = []
    let covered = 0
    for (let i = 0; i < found.length; i++) {
      const seg = found[i]!
      if (seg.last <= covered) {
        // Inside a range already taken: a part whose compaction finished.
        await this.removeKey(seg.key)
        continue
      }
      // Sorted by `first`: the next one is the first that could start inside this one.
      const overlapsNext = (found[i + 1]?.first ?? Infinity) <= seg.last
      if (overlapsNext && !(await this.load(seg))) {
        // A merged segment the crash tore: its parts are still there.
        await this.removeKey(seg.key)
        continue
      }
      // A partial overlap (never written so, but harmless): readers skip what they have.
      segments.push(seg)
      covered = seg.last
    }
    // Only the segment being written when a crash hit can be torn: the newest one.
    while (segments.length) {
      const newest = segments[segments.length - 1]!
      if (await this.load(newest)) break
      await this.removeKey(newest.key)
      segments.pop()
    }
    const log: Log = { owner, ws, segments, count: segments.at(-1)?.last ?? 0, pending: [], flushTimer: null, idleTimer: null }
    // Finishes a compaction of the previous run, then lets an unused log go from memory.
    this.scheduleIdle(log)
    return log
  }

  /** Append events; they get their `seq` and `at` now and are written within `flushMs`. */
  async append(owner: string, ws: string, events: NewEvent[]): Promise<TranscriptEvent[]> {
    const id = `${owner}:${ws}`
    for (;;) {
      const log = await this.open(owner, ws)
      // An idle log may have been let go meanwhile: append only to the current one.
      if (this.logs.get(id) !== log) continue
      const at = isoNow(this.clock)
      const placed = events.map((e) => ({ ...e, seq: ++log.count, at }) as TranscriptEvent)
      log.pending.push(...placed)
      if (!log.flushTimer && placed.length) {
        log.flushTimer = setTimeout(() => this.flushSoon(log), this.flushMs)
        log.flushTimer.unref?.()
      }
      return placed
    }
  }

  private flushSoon(log: Log): void {
    log.flushTimer = null
    this.flush(log.owner, log.ws).catch(() => {
      // Kept in `pending`; try again later rather than drop them.
      if (!log.flushTimer && this.logs.get(`${log.owner}:${log.ws}`) === log) {
        log.flushTimer = setTimeout(() => this.flushSoon(log), Math.max(this.flushMs, 1000))
        log.flushTimer.unref?.()
      }
    })
  }

  /** Write buffered events now (as one new segment per `segmentEvents`). */
  async flush(owner: string, ws: string): Promise<void> {
    const id = `${owner}:${ws}`
    await this.lock.run(id, async () => {
      const log = this.logs.get(id)
      if (!log) return
      if (log.flushTimer) clearTimeout(log.flushTimer)
      log.flushTimer = null
      if (!log.pending.length) return
      while (log.pending.length) {
        const batch = log.pending.slice(0, this.segmentEvents)
        const seg = { first: batch[0]!.seq, last: batch[batch.length - 1]!.seq, key: '' }
        seg.key = this.segmentKey(owner, ws, seg.first, seg.last)
        await this.store.set<StoredSegment>(seg.key, { first: seg.first, last: seg.last, events: batch })
        this.cache.put(seg.key, batch)
        // Index and buffer change together, so a reader finds every seq in one of them.
        log.segments.push(seg)
        log.pending.splice(0, batch.length)
      }
      if (this.mergeable(log) >= this.compactAfter) await this.compact(log)
      this.scheduleIdle(log)
    })
  }

  /**
   * Runs of adjacent small segments (under half of `segmentEvents`) that compaction can
   * merge: two or more each, oldest first.
   */
  private smallRuns(log: Log): Segment[][] {
    const runs: Segment[][] = []
    let run: Segment[] = []
    for (const seg of log.segments) {
      const small = seg.last - seg.first + 1 < this.segmentEvents / 2
      if (small && run.length && run[run.length - 1]!.last + 1 === seg.first) run.push(seg)
      else {
        if (run.length >= 2) runs.push(run)
        run = small ? [seg] : []
      }
    }
    if (run.length >= 2) runs.push(run)
    return runs
  }

  private mergeable(log: Log): number {
    return this.smallRuns(log).reduce((n, run) => n + run.length, 0)
  }

  /**
   * Merge runs of small segments into segments of up to `segmentEvents`. Each merged
   * segment is written under its own new key before its parts are deleted.
   */
  private async compact(log: Log): Promise<void> {
    const groups: Segment[][] = []
    for (const run of this.smallRuns(log)) {
      let group: Segment[] = []
      let size = 0
      for (const seg of run) {
        const n = seg.last - seg.first + 1
        if (group.length && size + n > this.segmentEvents) {
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
      const loaded = await Promise.all(parts.map((p) => this.load(p)))
      if (loaded.some((e) => e === null)) continue
      const events = (loaded as TranscriptEvent[][]).flat()
      const merged: Segment = { first: parts[0]!.first, last: parts[parts.length - 1]!.last, key: '' }
      merged.key = this.segmentKey(log.owner, log.ws, merged.first, merged.last)
      await this.store.set<StoredSegment>(merged.key, { first: merged.first, last: merged.last, events })
      this.cache.put(merged.key, events)
      const at = log.segments.indexOf(parts[0]!)
      if (at < 0) continue
      log.segments.splice(at, parts.length, merged)
      for (const p of parts) await this.removeKey(p.key)
    }
  }

  /** After `idleMs` without a flush: compact the tail, then let the log go from memory. */
  private scheduleIdle(log: Log): void {
    if (log.idleTimer) clearTimeout(log.idleTimer)
    const id = `${log.owner}:${log.ws}`
    log.idleTimer = setTimeout(() => {
      log.idleTimer = null
      void this.lock
        .run(id, async () => {
          if (this.logs.get(id) !== log || log.pending.length || log.flushTimer) return
          if (this.mergeable(log) >= 2) await this.compact(log)
          if (!log.pending.length && !log.flushTimer && !log.idleTimer) this.logs.delete(id)
        })
        .catch(() => {})
    }, this.idleMs)
    log.idleTimer.unref?.()
  }

  /** Events with `seq > after`, at most `limit`, optionally only one task's. */
  async read(owner: string, ws: string, opts: { after: number; limit: number; taskId?: string }): Promise<TranscriptEvent[]> {
    let log = await this.open(owner, ws)
    const out: TranscriptEvent[] = []
    const want = (e: TranscriptEvent) => !opts.taskId || e.task_id === opts.taskId
    // Each step looks up where `cursor + 1` lives now: flushes and compactions may move
    // events between the buffer and the segments while a read waits for the store.
    let cursor = opts.after
    while (out.length < opts.limit && cursor < log.count) {
      const next = cursor + 1
      const buffered = log.pending[0]
      if (buffered && next >= buffered.seq) {
        for (let i = next - buffered.seq; i < log.pending.length && out.length < opts.limit; i++) {
          const e = log.pending[i]!
          cursor = e.seq
          if (want(e)) out.push(e)
        }
        continue
      }
      const seg = findSegment(log.segments, next)
      if (!seg) break
      if (seg.first > next) {
        cursor = seg.first - 1 // events lost to damage: skip the gap
        continue
      }
      const events = await this.load(seg)
      if (!events) {
        const current = await this.open(owner, ws)
        // Still indexed and unreadable: damaged. Otherwise compacted or reopened: look again.
        if (current === log && log.segments.includes(seg)) cursor = seg.last
        log = current
        continue
      }
      for (let i = next - seg.first; i < events.length && out.length < opts.limit; i++) {
        const e = events[i]!
        cursor = e.seq
        if (want(e)) out.push(e)
      }
    }
    return out
  }

  /** The number of events in a workspace's log (its last `seq`). */
  async count(owner: string, ws: string): Promise<number> {
    return (await this.open(owner, ws)).count
  }

  /** Drop a workspace's log entirely. */
  async remove(owner: string, ws: string): Promise<void> {
    const id = `${owner}:${ws}`
    await this.opening.get(id)?.catch(() => {})
    await this.lock.run(id, async () => {
      const log = this.logs.get(id)
      if (log?.flushTimer) clearTimeout(log.flushTimer)
      if (log?.idleTimer) clearTimeout(log.idleTimer)
      this.logs.delete(id)
      for (const key of await this.store.keys(this.prefix(owner, ws))) await this.removeKey(key)
    })
  }

  /** Flush every open log and stop the background compaction timers (shutdown). */
  async flushAll(): Promise<void> {
    await Promise.all(
      [...this.logs.values()].map(async (log) => {
        if (log.idleTimer) clearTimeout(log.idleTimer)
        log.idleTimer = null
        await this.flush(log.owner, log.ws)
        if (log.idleTimer) clearTimeout(log.idleTimer)
        log.idleTimer = null
      }),
    )
  }
}

/** The segment holding `seq`, else the first one after it, else `undefined` (binary search). */
function findSegment(segments: Segment[], seq: number): Segment | undefined {
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
