/** Opening the WebSocket: the part of a socket the client uses, how one is opened, and its URL. */

/** The part of a WebSocket (browser's, or the `ws` package's) the client uses. */
export interface WebSocketLike {
  readonly readyState: number
  send(data: string): void
  close(code?: number, reason?: string): void
  addEventListener(
    type: 'open' | 'close' | 'error' | 'message',
    listener: (event: { data?: unknown; code?: number }) => void,
  ): void
}

/**
 * Opens one WebSocket to `url` (already `ws:`/`wss:` and ending in `/v1/ws`) for `token`.
 * The default uses the global `WebSocket` and `?token=` (browsers cannot set headers);
 * `@berth/client/node` passes one on the `ws` package that sends `Authorization`.
 */
export type ConnectSocket = (url: string, token: string | undefined) => WebSocketLike

/**
 * The WebSocket URL for a base URL: `http://h/p` → `ws://h/p/v1/ws`.
 *
 * @example
 * ```ts
 * socketUrl('https://berth.example/api') // 'wss://berth.example/api/v1/ws'
 * ```
 */
export function socketUrl(baseURL: string): string {
  const base = new URL(baseURL.endsWith('/') ? baseURL : `${baseURL}/`)
  base.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:'
  return new URL('v1/ws', base).href
}

/**
 * Opens the global `WebSocket` (browsers, Node 22+), the token in the query (browsers
 * cannot set headers on a WebSocket).
 *
 * @example
 * ```ts
 * const ws = globalConnect('ws://127.0.0.1:3000/v1/ws', token)
 * ```
 */
export const globalConnect: ConnectSocket = (url, token) => {
  const Impl = (globalThis as { WebSocket?: new (url: string) => WebSocketLike }).WebSocket
  if (!Impl) throw new TypeError('No global WebSocket here: pass `connect` (e.g. from @berth/client/node)')
  return new Impl(token ? `${url}?token=${encodeURIComponent(token)}` : url)
}

/**
 * True when a global `WebSocket` exists.
 *
 * @example
 * ```ts
 * const follow = hasGlobalWebSocket() ? 'socket' : 'polling'
 * ```
 */
export function hasGlobalWebSocket(): boolean {
  return typeof (globalThis as { WebSocket?: unknown }).WebSocket === 'function'
}

/**
 * A received frame as text: `ws` delivers text frames as Buffers, browsers as strings.
 *
 * @example
 * ```ts
 * frameText(new TextEncoder().encode('{}')) // '{}'
 * ```
 */
export function frameText(data: unknown): string {
  if (typeof data === 'string') return data
  // `ws` delivers text frames as Buffers (Uint8Array), browsers as strings.
  if (data instanceof Uint8Array || data instanceof ArrayBuffer) return new TextDecoder().decode(data)
  return String(data)
}
