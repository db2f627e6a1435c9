import { apiBase } from './api.js'
import { credentials } from './session.js'
import type { ClientMessage, ServerMessage } from '@berth/contract'

type Listener = (m: ServerMessage) => void

function send(ws: WebSocket, message: ClientMessage): void {
  ws.send(JSON.stringify(message))
}

/**
 * The console's one WebSocket to `/v1/ws`. Browsers cannot set headers on a WebSocket, so
 * the key goes in the socket URL's `?token=` (that URL never appears in the page's address
 * or history). Reconnects with backoff and re-subscribes; subscribers see each task's
 * history again after a reconnect and drop what they already have by seq.
 */
class Socket {
  private ws: WebSocket | null = null
  private readonly subs = new Map<string, number>()
  private readonly listeners = new Set<Listener>()
  private readonly stateListeners = new Set<(up: boolean) => void>()
  private retry = 0
  private timer: ReturnType<typeof setTimeout> | undefined
  up = false

  private connect(): void {
    const c = credentials()
    if (!c || this.ws) return
    const url = new URL(`${apiBase().replace(/^http/, 'ws')}/v1/ws`)
    url.searchParams.set('token', c.key)
    const ws = new WebSocket(url)
    this.ws = ws
    ws.onopen = () => {
      this.retry = 0
      this.setUp(true)
      for (const id of this.subs.keys()) send(ws, { type: 'subscribe', task_id: id })
    }
    ws.onmessage = (e) => {
      let m: ServerMessage
      try {
        m = JSON.parse(String(e.data))
      } catch {
        return
      }
      for (const l of this.listeners) l(m)
    }
    ws.onclose = () => {
      this.ws = null
      this.setUp(false)
      if (!credentials()) return
      const delay = Math.min(10_000, 500 * 2 ** this.retry++)
      this.timer = setTimeout(() => this.connect(), delay)
    }
  }

  private setUp(up: boolean): void {
    this.up = up
    for (const l of this.stateListeners) l(up)
  }

  /** Listen to every message; returns the unlisten function. */
  listen(l: Listener): () => void {
    this.listeners.add(l)
    this.connect()
    return () => this.listeners.delete(l)
  }

  /** Listen to the connection going up or down. */
  onState(l: (up: boolean) => void): () => void {
    this.stateListeners.add(l)
    l(this.up)
    return () => this.stateListeners.delete(l)
  }

  /** Subscribe to a task (counted: the last unsubscribe ends it). */
  subscribe(taskId: string): () => void {
    const n = this.subs.get(taskId) ?? 0
    this.subs.set(taskId, n + 1)
    if (n === 0 && this.ws?.readyState === WebSocket.OPEN) send(this.ws, { type: 'subscribe', task_id: taskId })
    this.connect()
    let done = false
    return () => {
      if (done) return
      done = true
      const left = (this.subs.get(taskId) ?? 1) - 1
      if (left > 0) return void this.subs.set(taskId, left)
      this.subs.delete(taskId)
      if (this.ws?.readyState === WebSocket.OPEN) send(this.ws, { type: 'unsubscribe', task_id: taskId })
    }
  }

  /** Close for good (sign-out). */
  close(): void {
    clearTimeout(this.timer)
    this.subs.clear()
    const ws = this.ws
    this.ws = null
    ws?.close()
  }
}

export const socket = new Socket()
