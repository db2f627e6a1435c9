/**
 * `/preview/<token>/…`: HTTP and WebSocket traffic to a port inside a session's container.
 * The target comes from the preview record alone (its workspace's container and port, or the
 * instance holding that container); the request only picks the path on that port.
 */
import {
  type ClientRequest,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { Duplex } from 'node:stream'
import { ApiError, errorResponse, type Logger, type PreviewRoute, type Services } from '@berth/core'
import { answerHeaders, copyAnswer, copyRawAnswer, HOP_BY_HOP, rawHead } from './upstream-answer.js'

/** `/preview/<token>` and the rest of the raw request target (never decoded, never normalised). */
const PREVIEW_PATH = /^\/preview\/([A-Za-z0-9_-]+)(\/[^#]*|\?[^#]*)?$/

/** Set on a request one instance forwards to another: the holder never forwards it again. */
const HOP_HEADER = 'x-berth-preview-hop'

/** What the agent's server never gets from the caller, and the caller never gets from it. */
const NOT_PASSED = new Set([HOP_HEADER])

/**
 * Every preview answer is sandboxed (a unique, opaque origin): the agent's pages share Berth's
 * host name, and must never read what the console keeps there or act as the caller.
 */
const SANDBOX = 'sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads'

/** The request headers to pass on: no hop-by-hop ones (nor those `Connection` names), no Berth bearer key. */
function passOn(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const named = String(headers.connection ?? '')
    .toLowerCase()
    .split(',')
    .map((s) => s.trim())
  const out: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || NOT_PASSED.has(name) || named.includes(name)) continue
    // A caller's Berth key never reaches the agent's server (other schemes are the app's own).
    if (name === 'authorization' && /^bearer\s/i.test(String(value))) continue
    out[name] = value
  }
  return out
}

/** The headers of the agent's answer to pass back (the one copy every proxy makes), sandboxed. */
function passBack(answer: IncomingMessage, upgrade = false): string[] {
  const back = answerHeaders(answer.rawHeaders, { drop: NOT_PASSED, upgrade })
  return upgrade ? back : [...back, 'content-security-policy', SANDBOX]
}

/** A Berth error as a raw HTTP/1.1 answer on a socket that asked to upgrade. */
async function refuseUpgrade(socket: Duplex, err: unknown, logger: Logger): Promise<void> {
  const res = errorResponse(err, logger)
  const body = await res.text()
  if (socket.destroyed) return
  const headers = ['content-type', 'application/json', 'content-length', String(Buffer.byteLength(body))]
  socket.end(`${rawHead(res.status, [...headers, 'connection', 'close'])}${body}`)
}

const UNKNOWN = () => new ApiError('NOT_FOUND', 'No such preview (unknown, expired or revoked)')

/** Where a preview request goes: the route, the rest of its target, its token and the container's port. */
interface Hop {
  route: PreviewRoute & { kind: 'here' | 'forward' }
  rest: string
  token: string
  port: number
}

/**
 * The preview proxy for a Node server: `matches` tells a preview request from the rest;
 * `request` serves HTTP, `upgrade` WebSocket (and any other upgrade). The agent's answers
 * pass through the one copy every proxy makes (`upstream-answer.ts`): whatever bytes its
 * server sends, the caller gets a well-formed answer or a 502 `CONTAINER_FAILED`.
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
  async function routeOf(req: IncomingMessage): Promise<Hop> {
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
    return { route, rest: rest.startsWith('?') ? `/${rest}` : rest, token, port: preview.port }
  }

  /**
   * The request to the next hop (the container's port, or the holder instance), not yet ended.
   * Node's client parses the answer, so the copy sees a status and headers, never raw bytes.
   */
  function open(hop: Hop, method: string | undefined, headers: OutgoingHttpHeaders, own = false): ClientRequest {
    if (hop.route.kind === 'here') {
      const { host, port, socketPath } = hop.route.target
      const to = socketPath ? { socketPath } : { host, port }
      return httpRequest({ ...to, method, path: hop.rest, headers, agent: own ? false : undefined })
    }
    const url = new URL(hop.route.url)
    const tls = url.protocol === 'https:'
    const send = tls ? httpsRequest : httpRequest
    return send({
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: Number(url.port) || (tls ? 443 : 80),
      method,
      path: `/preview/${hop.token}${hop.rest}`,
      headers: { ...headers, [HOP_HEADER]: '1' },
      agent: own ? false : undefined,
    })
  }

  const fail = async (res: ServerResponse, err: unknown) => {
    if (res.headersSent) return void res.destroy()
    const answer = errorResponse(err, o.logger)
    const body = await answer.text()
    if (res.destroyed) return
    res.writeHead(answer.status, { 'content-type': 'application/json' })
    res.end(body)
  }

  const refused = (err: unknown, port: number) =>
    new ApiError('CONTAINER_FAILED', `Nothing answered on port ${port} in the session's container`, {
      reason: 'unreachable',
      cause: (err as NodeJS.ErrnoException).code ?? 'error',
    })

  const invalid = (port: number) =>
    new ApiError('CONTAINER_FAILED', `No valid HTTP answer on port ${port} in the session's container`, {
      reason: 'invalid_answer',
    })

  async function serveRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let hop: Hop
    try {
      hop = await routeOf(req)
    } catch (err) {
      req.resume()
      return fail(res, err)
    }
    const headers = passOn(req.headers)
    headers['x-forwarded-for'] = req.socket.remoteAddress ?? ''
    const upstream = open(hop, req.method, headers)
    // Settled once an answer is passed on (its body's failures are then the copy's to handle) or refused.
    let settled = false
    const badGateway = (err: ApiError) => {
      if (settled || res.destroyed) return
      settled = true
      void fail(res, err)
    }
    upstream.on('response', (answer) => {
      if (copyAnswer(answer, res, passBack(answer))) settled = true
      else badGateway(invalid(hop.port))
    })
    upstream.on('error', (err) => badGateway(refused(err, hop.port)))
    // Closed without an answer or an error: a `101` to a request that asked for no upgrade.
    upstream.on('close', () => badGateway(invalid(hop.port)))
    // A caller that goes away ends the upstream request too.
    res.on('close', () => upstream.destroy())
    req.pipe(upstream)
  }

  async function serveUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy())
    let hop: Hop
    try {
      hop = await routeOf(req)
    } catch (err) {
      return refuseUpgrade(socket, err, o.logger)
    }
    const headers = passOn(req.headers)
    // The upgrade itself passes on; the rest of the connection headers do not.
    headers.connection = 'Upgrade'
    if (req.headers.upgrade) headers.upgrade = req.headers.upgrade
    // A connection of its own: once switched, it is this socket's and no pool's.
    const upstream = open(hop, req.method, headers, true)
    let settled = false
    const refuse = (err: ApiError) => {
      if (settled) return
      settled = true
      void refuseUpgrade(socket, err, o.logger)
    }
    upstream.on('upgrade', (answer, joined, upHead) => {
      settled = true
      socket.write(rawHead(101, passBack(answer, true)))
      if (upHead.length) socket.write(upHead)
      if (head.length) joined.write(head)
      joined.on('error', () => socket.destroy())
      joined.pipe(socket)
      socket.pipe(joined)
      socket.on('close', () => joined.destroy())
      joined.on('close', () => socket.destroy())
    })
    // Any other answer is passed back (sandboxed) and the connection closed after it.
    upstream.on('response', (answer) => {
      if (copyRawAnswer(answer, socket, passBack(answer))) settled = true
      else refuse(invalid(hop.port))
    })
    upstream.on('error', (err) => refuse(refused(err, hop.port)))
    upstream.on('close', () => refuse(invalid(hop.port)))
    socket.on('close', () => upstream.destroy())
    upstream.end()
  }

  return {
    matches: (req) => (req.url ?? '').startsWith('/preview/') && req.method !== 'CONNECT',
    request: (req, res) =>
      void serveRequest(req, res).catch((err: unknown) => fail(res, err).catch(() => res.destroy())),
    upgrade: (req, socket, head) => void serveUpgrade(req, socket, head).catch(() => socket.destroy()),
  }
}
