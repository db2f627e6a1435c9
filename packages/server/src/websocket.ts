import {
  ApiError,
  createAuthenticate,
  createTaskSocket,
  errorResponse,
  type Authenticate,
  type Caller,
  type Logger,
  type RateLimiter,
  type Services,
} from '@berth/core'
import * as crosswsNode from 'crossws/adapters/node'
import type { NodeAdapter } from 'crossws/adapters/node'

// crossws ships ESM only. In the CJS build, Node's require() hands over the module's
// namespace and the bundler's interop wraps it once more, so the function sits one
// `default` deeper there than in the ESM build.
const wrapped = crosswsNode.default as typeof crosswsNode.default | { default: typeof crosswsNode.default }
const nodeAdapter = typeof wrapped === 'function' ? wrapped : wrapped.default

type Session = ReturnType<typeof createTaskSocket>

/** Where the upgrade hook finds the client's address (set by `handleUpgrade`, never the client's). */
const ADDRESS_HEADER = 'x-berth-client-address'

export interface WebSocketOptions {
  services: Services
  logger: Logger
  rateLimiter: RateLimiter
  authenticate?: Authenticate | undefined
  /** Queued bytes beyond which a client is closed as too slow (default 1 MiB). */
  maxBuffered?: number
  /** Largest message accepted, in bytes (the JSON body limit, default 1 MiB); a larger frame closes the socket with 1009. */
  maxPayload?: number
}

/**
 * `/v1/ws` on crossws's Node adapter: the upgrade is authenticated like any `/v1` request
 * (bearer header, or `?token=` for browsers) and counted by the rate limiter; each socket
 * then runs a core task session. Hand the Node server's `upgrade` event to `handleUpgrade`.
 *
 * @example
 * ```ts
 * const ws = createWebSocket({ services, logger, rateLimiter })
 * server.on('upgrade', ws.handleUpgrade)
 * ```
 */
export function createWebSocket(o: WebSocketOptions): {
  handleUpgrade: NodeAdapter['handleUpgrade']
  closeAll(opts?: { force?: boolean }): void
} {
  const authenticate = createAuthenticate(o, true)
  const sessions = new Map<string, Session>()
  // Set by closeAll: a shutdown refuses upgrades still arriving on kept-alive connections.
  let closing = false
  const adapter = nodeAdapter({
    // ws refuses a larger frame before buffering it, closing with 1009 (message too big).
    serverOptions: { maxPayload: o.maxPayload ?? 1024 * 1024 },
    hooks: {
      async upgrade(request) {
        try {
          if (new URL(request.url).pathname !== '/v1/ws')
            throw new ApiError('NOT_FOUND', 'No WebSocket here: connect to /v1/ws')
          const caller = await authenticate(request)
          if (!caller) {
            o.services.audit.authFailed(request.headers.get(ADDRESS_HEADER))
            throw new ApiError(
              'UNAUTHORIZED',
              'Missing or invalid credentials: send Authorization: Bearer <key> or ?token=<key>',
            )
          }
          const decision = await o.rateLimiter.take(caller.id)
          if (!decision.allowed) {
            throw new ApiError(
              'RATE_LIMITED',
              'Rate limit exceeded',
              { retry_after: decision.retryAfterSeconds },
              { 'retry-after': String(decision.retryAfterSeconds) },
            )
          }
          return { context: { caller } }
        } catch (err) {
          return errorResponse(err, o.logger)
        }
      },
      open(peer) {
        if (closing) return peer.close(1001, 'server shutting down')
        const caller = peer.context.caller as Caller
        sessions.set(
          peer.id,
          createTaskSocket({
            caller,
            services: o.services,
            send: (m) => peer.send(JSON.stringify(m)),
            buffered: () => peer.bufferedAmount,
            close: (code, reason) => peer.close(code, reason),
            maxBuffered: o.maxBuffered,
            take: () => o.rateLimiter.take(caller.id),
          }),
        )
      },
      async message(peer, message) {
        await sessions.get(peer.id)?.message(message.text())
      },
      close(peer) {
        sessions.get(peer.id)?.close()
        sessions.delete(peer.id)
      },
      error(peer, error) {
        o.logger.warn('websocket error', { error: String(error) })
        sessions.get(peer.id)?.close()
        sessions.delete(peer.id)
      },
    },
  })
  return {
    handleUpgrade: (req, socket, head) => {
      // crossws hands the hook a Request without the socket: the address rides in a header
      // Berth sets here, over any value the client sent.
      req.headers[ADDRESS_HEADER] = req.socket.remoteAddress ?? 'unknown'
      return adapter.handleUpgrade(req, socket, head)
    },
    // 1001 "going away": clients reconnect elsewhere or later. `force` drops the sockets of
    // clients that never answered the close handshake (a shutdown's grace is over).
    closeAll: (opts = {}) => {
      closing = true
      adapter.closeAll(1001, 'server shutting down', opts.force ?? false)
    },
  }
}
