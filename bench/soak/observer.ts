/**
 * The live side of the soak: one WebSocket client subscribed to every task, reconnecting
 * after each server restart and subscribing again to whatever it has not seen end. What each
 * subscription received is kept, to compare with storage at the end.
 */
import WebSocket from 'ws'
import type { Json } from './api.js'

const TERMINAL = new Set(['completed', 'failed', 'cancelled'])

/** What one subscription to one task received. */
export interface Subscription {
  /** Which connection (0, 1, ... one per server run) it was made on. */
  generation: number
  events: Json[]
  /** The last status it was told. */
  status: string | null
}

export class TaskObserver {
  private ws: WebSocket | null = null
  private generation = -1
  private readonly subs = new Map<string, Subscription>()
  private readonly waiters = new Map<string, (() => void)[]>()
  private closed = false
  /** Messages that were not JSON or not understood, and `error` messages. */
  readonly problems: string[] = []

  /** Connect (again) to a server, subscribing to every task not yet seen ending. */
  async connect(url: string, token: string): Promise<void> {
    this.generation++
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/ws`, { headers: { authorization: `Bearer ${token}` } })
    await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject))
    ws.on('error', () => {}) // a killed server resets the socket; the restart reconnects
    const generation = this.generation
    ws.on('message', (raw) => generation === this.generation && this.onMessage(String(raw)))
    this.ws = ws
    for (const [taskId, sub] of this.subs) if (!TERMINAL.has(sub.status ?? '')) this.subscribe(taskId)
  }

  subscribe(taskId: string): void {
    this.subs.set(taskId, { generation: this.generation, events: [], status: null })
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'subscribe', task_id: taskId }))
  }

  /** Resolves once a subscription saw the task end (or `poll` says it did). */
  async ended(taskId: string, poll: () => Promise<boolean>): Promise<void> {
    const seen = new Promise<void>((resolve) => {
      if (this.closed || TERMINAL.has(this.subs.get(taskId)?.status ?? '')) return resolve()
      this.waiters.set(taskId, [...(this.waiters.get(taskId) ?? []), resolve])
    })
    // A slow poll as a safety net: the soak must not hang on a lost message (that is a
    // finding of its own: the comparison with storage reports it).
    let done = false
    void seen.then(() => (done = true))
    while (!done) {
      await Promise.race([seen, new Promise((r) => setTimeout(r, 2_000))])
      if (!done && (await poll().catch(() => false))) break
    }
  }

  get(taskId: string): Subscription | undefined {
    return this.subs.get(taskId)
  }

  /** Disconnect, and end every wait for a task (the soak is over, or failed). */
  close(): void {
    this.closed = true
    this.ws?.terminate()
    for (const waiters of this.waiters.values()) for (const w of waiters) w()
    this.waiters.clear()
  }

  private onMessage(text: string): void {
    let m: Json
    try {
      m = JSON.parse(text) as Json
    } catch {
      this.problems.push(`not JSON: ${text.slice(0, 200)}`)
      return
    }
    const sub = typeof m.task_id === 'string' ? this.subs.get(m.task_id) : undefined
    if (m.type === 'task.event' && sub) sub.events.push(m.event as Json)
    else if (m.type === 'task.status' && sub) {
      sub.status = m.status as string
      if (TERMINAL.has(sub.status)) for (const w of this.waiters.get(m.task_id) ?? []) w()
    } else if (m.type === 'error') this.problems.push(`error message: ${text.slice(0, 300)}`)
  }
}
