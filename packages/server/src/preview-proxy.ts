/**
 * `/preview/<token>/…`: HTTP and WebSocket traffic to a port inside a session's container.
 * The target comes from the preview record alone (its workspace's container and port, or the
 * instance holding that container); the request only picks the path on that port.
 */
import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { connect as netConnect } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import type { Duplex } from 'node:stream'
import { ApiError, errorResponse, type Logger, type PreviewRoute, type Services } from '@berth/core'

/** `/preview/<token>` and the rest of the raw request target (never decoded, never normalised). */
const PREVIEW_PATH = /^\/preview\/([A-Za-z0-9_-]+)(\/[^#]*|\?[^#]*)?$/

/** Set on a request one instance forwards to another: the holder never forwards it again. */
const HOP_HEADER = 'x-berth-preview-hop'

/** Connection-level headers (RFC 9110 7.6.1) and the proxy's own: never passed on. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  HOP_HEADER,
])

/**
 * Every preview answer is sandboxed (a unique, opaque origin): the agent's pages share Berth's
 * host name, and must never read what the console keeps there or act as the caller.
 */
const SANDBOX = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads'

/** The headers to pass on: no hop-by-hop ones (nor those `Connection` names), no Berth bearer key. */
function passOn(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const named = String(headers.connection ?? '')
    .toLowerCase()
    .split(',')
    .map((s) => s.trim())
  const out: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.includes(name)) continue
    // A caller's Berth key never reaches the agent's server (other schemes are the app's own).
    if (name === 'authorization' && /^bearer\s/i.test(String(value))) continue
    out[name] = value
  }
  return out
}

/** A Berth error as a raw HTTP/1.1 answer on a socket that asked to upgrade. */
async function refuseUpgrade(socket: Duplex, err: unknown, logger: Logger): Promise<void> {
  const res = errorResponse(err, logger)
  const body = await res.text()
  const reason = res.status === 404 ? 'Not Found' : 'Error'
  socket.end(
    `HTTP/1.1 ${res.status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  )
}

const UNKNOWN = () => new ApiError('NOT_FOUND', 'No such preview (unknown, expired or revoked)')

/**
 * The preview proxy for a Node server: `matches` tells a preview request from the rest;
 * `request` serves HTTP, `upgrade` WebSocket (and any other upgrade) by piping raw bytes.
 *
 * @example
 * ```ts
 * const previews = createPreviewProxy({ services, logger })
 * createServer((req, res) => (previews.matches(req) ? previews.request(req, res) : handler(req, res)))
 * ```
 */
export function createPreviewProxy(o: { services: Services; logger: Logger }): {
  matches(req: IncomingMessage): boolean
  request(req: IncomingMessage, res: ServerResponse): void
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void
} {
  /** Where the request goes; a thrown ApiError when nowhere. */
  async function routeOf(
    req: IncomingMessage,
  ): Promise<{ route: PreviewRoute & { kind: 'here' | 'forward' }; rest: string; token: string }> {
    const m = PREVIEW_PATH.exec(req.url ?? '')
    const token = m?.[1] ?? ''
    const preview = m ? await o.services.previews.find(token) : null
    if (!preview) throw UNKNOWN()
    const route = await o.services.previews.route(preview)
    if (route.kind === 'unavailable') throw new ApiError('CONTAINER_FAILED', route.message, { reason: 'unreachable' })
    // A forwarded request that still is not on its holder stops here (no loops between instances).
    if (route.kind === 'forward' && req.headers[HOP_HEADER])
      throw new ApiError('CONTAINER_FAILED', "The session's container moved while the request was forwarded", {
        reason: 'unreachable',
      })
    const rest = m?.[2] ?? '/'
    return { route, rest: rest.startsWith('?') ? `/${rest}` : rest, token }
  }

  /** Host, port, path and TLS of the next hop: the container's port, or the holder instance. */
  function hop(route: PreviewRoute & { kind: 'here' | 'forward' }, rest: string, token: string) {
    if (route.kind === 'here') {
      const { host, port, socketPath } = route.target
      return { host, port, socketPath, path: rest, tls: false }
    }
    const url = new URL(route.url)
    const tls = url.protocol === 'https:'
    return {
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: Number(url.port) || (tls ? 443 : 80),
      socketPath: undefined,
      path: `/preview/${token}${rest}`,
      tls,
    }
  }

  const fail = async (res: ServerResponse, err: unknown) => {
    if (res.headersSent) return void res.destroy()
    const answer = errorResponse(err, o.logger)
    res.writeHead(answer.status, { 'content-type': 'application/json' })
    res.end(await answer.text())
  }

  const refused = (err: unknown, port: number) =>
    new ApiError('CONTAINER_FAILED', `Nothing answered on port ${port} in the session's container`, {
      reason: 'unreachable',
      cause: (err as NodeJS.ErrnoException).code ?? 'error',
    })

  return {
    matches: (req) => (req.url ?? '').startsWith('/preview/') && req.method !== 'CONNECT',

    request(req, res) {
      routeOf(req).then(
        ({ route, rest, token }) => {
          const next = hop(route, rest, token)
          const headers = passOn(req.headers)
          headers['x-forwarded-for'] = req.socket.remoteAddress ?? ''
          if (route.kind === 'forward') headers[HOP_HEADER] = '1'
          const send = next.tls ? httpsRequest : httpRequest
          const to = next.socketPath ? { socketPath: next.socketPath } : { host: next.host, port: next.port }
          const upstream = send({ ...to, method: req.method, path: next.path, headers })
          upstream.on('response', (answer) => {
            const back = passOn(answer.headers)
            back['content-security-policy'] = [back['content-security-policy'] ?? []].flat().concat(SANDBOX)
            res.writeHead(answer.statusCode ?? 502, answer.statusMessage, back)
            answer.pipe(res)
          })
          upstream.on('error', (err) => void fail(res, refused(err, route.kind === 'here' ? next.port : 0)))
          // A caller that goes away ends the upstream request too.
          res.on('close', () => upstream.destroy())
          req.pipe(upstream)
        },
        (err: unknown) => {
          req.resume()
          return fail(res, err)
        },
      )
    },

    upgrade(req, socket, head) {
      socket.on('error', () => socket.destroy())
      routeOf(req).then(
        ({ route, rest, token }) => {
          const next = hop(route, rest, token)
          const headers = passOn(req.headers)
          // The upgrade itself passes on; the rest of the connection headers do not.
          headers.connection = 'Upgrade'
          if (req.headers.upgrade) headers.upgrade = req.headers.upgrade
          if (route.kind === 'forward') headers[HOP_HEADER] = '1'
          const upstream = next.tls
            ? tlsConnect({ host: next.host, port: next.port, servername: next.host })
            : netConnect(next.socketPath ? { path: next.socketPath } : { host: next.host, port: next.port })
          upstream.once('error', (err) => {
            if (upstream.bytesRead === 0) void refuseUpgrade(socket, refused(err, next.port), o.logger)
            else socket.destroy()
          })
          upstream.once(next.tls ? 'secureConnect' : 'connect', () => {
            const lines = Object.entries(headers).flatMap(([k, v]) =>
              (Array.isArray(v) ? v : [v]).map((x) => `${k}: ${x}`),
            )
            upstream.write(`${req.method} ${next.path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`)
            if (head.length) upstream.write(head)
            upstream.pipe(socket)
            socket.pipe(upstream)
            socket.on('close', () => upstream.destroy())
            upstream.on('close', () => socket.destroy())
          })
        },
        (err: unknown) => refuseUpgrade(socket, err, o.logger),
      )
    },
  }
}
