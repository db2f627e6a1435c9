import { KeyedMutex } from '../internal/mutex.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { TranscriptEvent } from '../schemas/task.js'

/** An event before it has a place in the log. */
export type NewEvent = { type: TranscriptEvent['type']; task_id: string } & Record<string, unknown>

interface Head {
  /** Events stored or buffered. */
  count: number
  /** Events not yet written. */
  pending: TranscriptEvent[]
  timer: ReturnType<typeof setTimeout> | null
}

export interface EventLogOptions {
  /** Events per stored chunk: an append rewrites at most the last chunk. */
  chunkSize?: number
  /** How long appends are buffered before they are written. */
  flushMs?: number
}

/**
 * The append-only event log of each workspace (its transcript): dense `seq` from 1, stored
 * in fixed-size chunks (`eventlog:<owner>:<ws>:<n>`) so an append rewrites at most one
 * small chunk and never the log. Appends are buffered for `flushMs` (token deltas come in
 * bursts); reads see buffered events too. Until a flush, the runner's own event file in
 * the workspace is the durable copy.
 *
 * @example
 * ```ts
 * const log = new EventLog(store, clock)
 * const [e] = await log.append('usr_1', 'ws_1', [{ type: 'token', task_id: 'task_1', text: 'Hi' }])
 * e.seq // 1
 * ```
 */
export class EventLog {
  private readonly heads = new Map<string, Head>()
  private readonly lock = new KeyedMutex()
  private readonly chunkSize: number
  private readonly flushMs: number

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    opts: EventLogOptions = {},
  ) {
    this.chunkSize = opts.chunkSize ?? 200
    this.flushMs = opts.flushMs ?? 50
  }

  private chunkKey(owner: string, ws: string, n: number): string {
    return `eventlog:${owner}:${ws}:${String(n).padStart(8, '0')}`
  }

  private async head(owner: string, ws: string): Promise<Head> {
    const id = `${owner}:${ws}`
    let head = this.heads.get(id)
    if (head) return head
    // The count is what the chunks hold: the last chunk says how far the log got.
    const keys = await this.store.keys(`eventlog:${owner}:${ws}:`)
    let count = 0
    if (keys.length) {
      const last = keys.sort().at(-1)!
      const n = Number(last.slice(last.lastIndexOf(':') + 1))
      count = n * this.chunkSize + ((await this.store.get<TranscriptEvent[]>(last))?.length ?? 0)
    }
    head = this.heads.get(id) ?? { count, pending: [], timer: null }
    this.heads.set(id, head)
    return head
  }

  /** Append events; they get their `seq` and `at` now and are written within `flushMs`. */
  async append(owner: string, ws: string, events: NewEvent[]): Promise<TranscriptEvent[]> {
    const head = await this.head(owner, ws)
    const at = isoNow(this.clock)
    const placed = events.map((e) => ({ ...e, seq: ++head.count, at }) as TranscriptEvent)
    head.pending.push(...placed)
    if (!head.timer) {
      head.timer = setTimeout(() => void this.flush(owner, ws).catch(() => {}), this.flushMs)
      head.timer.unref?.()
    }
    return placed
  }

  /** Write buffered events now. */
  async flush(owner: string, ws: string): Promise<void> {
    await this.lock.run(`${owner}:${ws}`, async () => {
      const head = this.heads.get(`${owner}:${ws}`)
      if (!head) return
      if (head.timer) clearTimeout(head.timer)
      head.timer = null
      while (head.pending.length) {
        const first = head.pending[0]!
        const n = Math.floor((first.seq - 1) / this.chunkSize)
        const end = (n + 1) * this.chunkSize
        const batch = head.pending.filter((e) => e.seq <= end)
        const key = this.chunkKey(owner, ws, n)
        const stored = (await this.store.get<TranscriptEvent[]>(key)) ?? []
        const keep = stored.filter((e) => e.seq < first.seq)
        await this.store.set(key, [...keep, ...batch])
        head.pending.splice(0, batch.length)
      }
    })
  }

  /** Events with `seq > after`, at most `limit`, optionally only one task's. */
  async read(owner: string, ws: string, opts: { after: number; limit: number; taskId?: string }): Promise<TranscriptEvent[]> {
    const head = await this.head(owner, ws)
    const out: TranscriptEvent[] = []
    const pendingFrom = head.pending[0]?.seq ?? head.count + 1
    let n = Math.floor(opts.after / this.chunkSize)
    const want = (e: TranscriptEvent) => e.seq > opts.after && (!opts.taskId || e.task_id === opts.taskId)
    while (out.length < opts.limit && n * this.chunkSize + 1 < pendingFrom) {
      const chunk = (await this.store.get<TranscriptEvent[]>(this.chunkKey(owner, ws, n))) ?? []
      for (const e of chunk) if (e.seq < pendingFrom && want(e) && out.length < opts.limit) out.push(e)
      n++
    }
    for (const e of head.pending) if (want(e) && out.length < opts.limit) out.push(e)
    return out
  }

  /** The number of events in a workspace's log. */
  async count(owner: string, ws: string): Promise<number> {
    return (await this.head(owner, ws)).count
  }

  /** Drop a workspace's log entirely. */
  async remove(owner: string, ws: string): Promise<void> {
    await this.lock.run(`${owner}:${ws}`, async () => {
      const head = this.heads.get(`${owner}:${ws}`)
      if (head?.timer) clearTimeout(head.timer)
      this.heads.delete(`${owner}:${ws}`)
      for (const key of await this.store.keys(`eventlog:${owner}:${ws}:`)) await this.store.remove(key)
    })
  }

  /** Flush every log (shutdown). */
  async flushAll(): Promise<void> {
    await Promise.all([...this.heads.keys()].map((id) => {
      const [owner, ws] = id.split(':') as [string, string]
      return this.flush(owner, ws)
    }))
  }
}
