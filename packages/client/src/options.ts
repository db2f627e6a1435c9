import type { BerthSocketOptions } from './socket.js'
import type { ConnectSocket } from './socket-connect.js'
import type { RetryOptions } from './types.js'

/** Options of {@link createBerthClient}. */
export interface BerthClientOptions {
  /** Where Berth answers, e.g. `http://127.0.0.1:3000` (a path prefix like `/berth` is kept). */
  baseURL: string
  /** Caller key sent as `Authorization: Bearer …`; a function is asked before every attempt. */
  token?: string | (() => string | undefined | Promise<string | undefined>)
  /** A `fetch` implementation (default: the global one). */
  fetch?: typeof globalThis.fetch
  /** Retry policy for idempotent calls; a number is the retry count, `false` disables. Default 2 retries. */
  retry?: RetryOptions | number | false
  /** Milliseconds per attempt before failing with `TIMEOUT` (default: no timeout). */
  timeout?: number
  /** Headers sent with every call. */
  headers?: Record<string, string>
  /**
   * How `tasks.run`, `tasks.stream` and sessions open the WebSocket: default the global
   * `WebSocket` when there is one (browsers, Node 22+); `@berth/client/node` uses the `ws`
   * package. `false`: never, follow tasks by polling `GET /v1/tasks/:id/events`.
   */
  websocket?: ConnectSocket | false
  /** Reconnect policy of those sockets (default 3 consecutive failed attempts, then polling). */
  reconnect?: BerthSocketOptions['reconnect']
  /** Milliseconds between polls when following a task without a WebSocket (default 1000). */
  pollInterval?: number
}
