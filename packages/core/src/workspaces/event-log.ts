/** The transcript store: each workspace's append-only event log, buffered, segmented, compacted and recovered. */
import { KeyedMutex } from '../internal/mutex.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { TranscriptEvent } from '@berth/contract'
import { compact, mergeable } from './event-log-compaction.js'
import { recoverSegments } from './event-log-recovery.js'
import { findSegment, SegmentStore, type Segment } from './event-segments.js'

/** An event before it has a place in the log. */
export type NewEvent = { type: TranscriptEvent['type']; task_id: string } & Record<string, unknown>

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
  private readonly segments: SegmentStore
  private readonly flushMs: number
  private readonly segmentEvents: number
  private readonly compactAfter: number
  private readonly idleMs: number

  constructor(
    store: Store,
    private readonly clock: Clock,
    opts: EventLogOptions = {},
  ) {
    this.flushMs = opts.flushMs ?? 50
    this.segmentEvents = Math.max(1, opts.segmentEvents ?? 1000)
    this.compactAfter = Math.max(2, opts.compactAfter ?? 16)
    this.idleMs = opts.idleMs ?? 2000
    this.segments = new SegmentStore(store, opts.cacheEvents ?? 100_000)
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

  /** The log as stored: its intact segments, continuing after the last intact event. */
  private async recover(owner: string, ws: string): Promise<Log> {
    const segments = await recoverSegments(this.segments, owner, ws)
    const log: Log = {
      owner,
      ws,
      segments,
      count: segments.at(-1)?.last ?? 0,
      pending: [],
      flushTimer: null,
      idleTimer: null,
    }
    // Finishes a compaction of the previous run, then lets an unused log go from memory.
    this.scheduleIdle(log)
    return log
  }

  /**
   * Append events; they get their `seq` and `at` now (`keepAt`: events copied from another
   * log keep their `at`) and are written within `flushMs`.
   */
  async append(owner: string, ws: string, events: NewEvent[], opts?: { keepAt?: boolean }): Promise<TranscriptEvent[]> {
    const id = `${owner}:${ws}`
    for (;;) {
      const log = await this.open(owner, ws)
      // An idle log may have been let go meanwhile: append only to the current one.
      if (this.logs.get(id) !== log) continue
      const at = isoNow(this.clock)
      const placed = events.map(
        (e) =>
          ({ ...e, seq: ++log.count, at: opts?.keepAt && typeof e.at === 'string' ? e.at : at }) as TranscriptEvent,
      )
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
        const seg = await this.segments.write(owner, ws, batch)
        // Index and buffer change together, so a reader finds every seq in one of them.
        log.segments.push(seg)
        log.pending.splice(0, batch.length)
      }
      if (mergeable(log.segments, this.segmentEvents) >= this.compactAfter)
        await compact(log, this.segments, this.segmentEvents)
      this.scheduleIdle(log)
    })
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
          if (mergeable(log.segments, this.segmentEvents) >= 2) await compact(log, this.segments, this.segmentEvents)
          if (!log.pending.length && !log.flushTimer && !log.idleTimer) this.logs.delete(id)
        })
        .catch(() => {})
    }, this.idleMs)
    log.idleTimer.unref?.()
  }

  /** Events with `seq > after`, at most `limit`, optionally only one task's. */
  async read(
    owner: string,
    ws: string,
    opts: { after: number; limit: number; taskId?: string },
  ): Promise<TranscriptEvent[]> {
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
      const events = await this.segments.load(seg)
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
      await this.segments.removeAll(owner, ws)
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
