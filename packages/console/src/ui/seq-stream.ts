import type { TranscriptEvent } from '@berth/contract'

export type { TranscriptEvent }

export interface SeqStreamOptions {
  /** Receives events exactly once each, in seq order. */
  deliver(events: TranscriptEvent[]): void
  /**
   * The authoritative log after a seq (every event there is, in order). Called when a gap
   * shows up, so events that never came live (a reconnect, a dropped frame) are fetched.
   */
  fetchAfter(after: number): Promise<TranscriptEvent[]>
  /** Called when a refetch fails (it is retried on the next gap). */
  onError?(err: unknown): void
}

/**
 * Orders a live event stream by seq: duplicates are dropped, events are delivered in seq
 * order, and an event that arrives after a gap is held until the gap is filled from the
 * authoritative log. Seqs are dense per workspace; a task's own events may skip the seqs of
 * other tasks of its session, so a gap the log confirms as empty is skipped, not waited on.
 *
 * @example
 * ```ts
 * const s = new SeqStream({ deliver: render, fetchAfter: (after) => api(`/v1/tasks/${id}/events?after=${after}`) })
 * s.push([{ seq: 1, … }, { seq: 3, … }]) // delivers 1, fetches after 1, then delivers 2 and 3
 * ```
 */
export class SeqStream {
  /** The highest seq delivered. */
  last = 0
  private readonly held = new Map<number, TranscriptEvent>()
  private fetching: Promise<void> | null = null
  private again = false

  constructor(private readonly o: SeqStreamOptions) {}

  /** Events from anywhere (the socket, a page of history), in any order, possibly repeated. */
  push(events: readonly TranscriptEvent[]): void {
    for (const e of events) {
      if (typeof e?.seq !== 'number' || e.seq <= this.last || this.held.has(e.seq)) continue
      this.held.set(e.seq, e)
    }
    this.drain()
    if (this.held.size > 0) this.fill()
  }

  /**
   * Catch up with the log now, gap or not: events dropped at the very end of a stream
   * leave no gap behind them, so call this when the task ends or the socket reconnects.
   */
  sync(): Promise<void> {
    this.fill()
    return this.settled()
  }

  /** Events held back behind a gap. */
  get waiting(): number {
    return this.held.size
  }

  private drain(): void {
    const out: TranscriptEvent[] = []
    for (let next = this.held.get(this.last + 1); next; next = this.held.get(this.last + 1)) {
      this.held.delete(next.seq)
      this.last = next.seq
      out.push(next)
    }
    if (out.length) this.o.deliver(out)
  }

  /** Fetch what lies after `last`; the log is the truth, so it ends the gap either way. */
  private fill(): void {
    if (this.fetching) {
      this.again = true
      return
    }
    this.fetching = (async () => {
      try {
        const page = await this.o.fetchAfter(this.last)
        const known = page.filter((e) => e.seq > this.last)
        for (const e of known) if (!this.held.has(e.seq)) this.held.set(e.seq, e)
        // Everything up to the log's newest seq is now known: deliver it in order, gaps
        // included (they belong to other tasks of the workspace).
        const upTo = known.reduce((m, e) => Math.max(m, e.seq), this.last)
        const ready = [...this.held.values()].filter((e) => e.seq <= upTo).sort((a, b) => a.seq - b.seq)
        for (const e of ready) this.held.delete(e.seq)
        if (ready.length) {
          this.last = ready[ready.length - 1]!.seq
          this.o.deliver(ready)
        }
        this.drain()
      } catch (err) {
        this.o.onError?.(err)
      } finally {
        this.fetching = null
      }
      if (this.held.size > 0 && this.again) {
        this.again = false
        this.fill()
      }
    })()
  }

  /** Resolves once no refetch is under way (tests). */
  async settled(): Promise<void> {
    while (this.fetching) await this.fetching
  }
}
