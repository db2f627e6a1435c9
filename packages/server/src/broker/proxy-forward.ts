import type { IncomingMessage, ServerResponse } from 'node:http'
import { request as httpRequest } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP } from 'node:net'
import type { Duplex } from 'node:stream'
import { rootCertificates } from 'node:tls'
import { copyAnswer, copyRawAnswer, rawHead } from '../upstream-answer.js'
import { type Injection, responseHeaders, rewriteRequestHeaders } from './proxy-grant.js'

/** One checked destination and what the proxy adds to its requests. */
export interface ForwardTarget {
  task_id: string
  /** The name the client asked for (and, over TLS, the name the upstream's certificate must carry). */
  host: string
  port: number
  /** The address the policy checked; the proxy connects to it and to nothing else. */
  address: string
  tls: boolean
  injection: Injection
}

/** What forwarding needs beyond the target. */
export interface ForwardContext {
  /** Extra roots for upstream TLS, beside the system's. */
  upstreamCa: string[]
  warn(msg: string, fields?: object): void
  /** Every upstream socket, so closing the proxy can end them. */
  track(socket: Duplex): void
}

function upstreamOptions(target: ForwardTarget, req: IncomingMessage, ctx: ForwardContext, headers: string[]) {
  const base = { host: target.address, port: target.port, method: req.method, path: req.url, headers, agent: false }
  if (!target.tls) return base
  const ca = [...rootCertificates, ...ctx.upstreamCa, ...(target.injection.caPem ? [target.injection.caPem] : [])]
  // The certificate is checked against the name the client asked for, not the address.
  return { ...base, ca, servername: isIP(target.host) ? undefined : target.host }
}

function open(target: ForwardTarget, req: IncomingMessage, ctx: ForwardContext, headers: string[]) {
  const options = upstreamOptions(target, req, ctx, headers)
  const upstream = target.tls ? httpsRequest(options) : httpRequest(options)
  upstream.on('socket', (s) => ctx.track(s))
  return upstream
}

// The error's code only: messages of TLS and socket errors carry no header, but the code
// is all a client needs and keeps anything else out of what the proxy writes.
function failure(target: ForwardTarget, err: NodeJS.ErrnoException, ctx: ForwardContext): string {
  const code = err.code ?? 'EPROXY'
  ctx.warn('egress proxy: upstream request failed', { task_id: target.task_id, host: target.host, code })
  return `the proxy could not complete the request to ${target.host}:${target.port} (${code})\n`
}

/**
 * Send one request to its checked destination with its headers rewritten, and stream the
 * answer back as it comes, through the one copy every proxy makes (`upstream-answer.ts`): an
 * answer that is no valid HTTP (a bad status, none at all) is the proxy's 502.
 */
export function forwardRequest(
  req: IncomingMessage,
  res: ServerResponse,
  target: ForwardTarget,
  ctx: ForwardContext,
  headers = rewriteRequestHeaders(req.rawHeaders, target.injection),
): void {
  let upstream: ReturnType<typeof open>
  try {
    upstream = open(target, req, ctx, headers)
  } catch (err) {
    // Node refuses a header value with a control character (a secret may hold one).
    res.writeHead(400, { 'content-type': 'text/plain' }).end(failure(target, err as NodeJS.ErrnoException, ctx))
    return
  }
  // Settled once an answer is passed on (its body's failures are then the copy's to handle) or refused.
  let settled = false
  const badGateway = (err: NodeJS.ErrnoException) => {
    if (settled || res.destroyed) return
    settled = true
    res.writeHead(502, { 'content-type': 'text/plain' }).end(failure(target, err, ctx))
  }
  upstream.on('response', (up) => {
    if (copyAnswer(up, res, responseHeaders(up.rawHeaders, target.injection))) settled = true
    else badGateway(invalidAnswer())
  })
  upstream.on('error', badGateway)
  // Closed without an answer and without an error: a `101` to a request that asked for no upgrade.
  upstream.on('close', () => badGateway(invalidAnswer()))
  res.on('close', () => upstream.destroy())
  req.pipe(upstream)
}

/**
 * Forward a request that asks to switch protocols (a WebSocket): on `101` the two
 * connections are joined byte for byte; any other answer is passed back and the
 * connection closed.
 */
export function forwardUpgrade(
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
  target: ForwardTarget,
  ctx: ForwardContext,
): void {
  let upstream: ReturnType<typeof open>
  try {
    upstream = open(target, req, ctx, rewriteRequestHeaders(req.rawHeaders, target.injection, true))
  } catch (err) {
    client.end(rawResponse(400, [], failure(target, err as NodeJS.ErrnoException, ctx)))
    return
  }
  let settled = false
  const badGateway = (err: NodeJS.ErrnoException) => {
    if (settled || client.destroyed) return
    settled = true
    client.end(rawResponse(502, [], failure(target, err, ctx)))
  }
  upstream.on('upgrade', (up, socket, upHead) => {
    settled = true
    client.write(rawHead(101, responseHeaders(up.rawHeaders, target.injection, true)))
    if (upHead.length > 0) client.write(upHead)
    if (head.length > 0) socket.write(head)
    socket.pipe(client).pipe(socket)
    socket.on('error', () => client.destroy())
    client.on('close', () => socket.destroy())
  })
  upstream.on('response', (up) => {
    const headers = responseHeaders(up.rawHeaders, target.injection)
    if (copyRawAnswer(up, client, headers)) settled = true
    else badGateway(invalidAnswer())
  })
  upstream.on('error', badGateway)
  upstream.on('close', () => badGateway(invalidAnswer()))
  client.on('error', () => upstream.destroy())
  upstream.end()
}

/** An upstream whose answer the proxy does not pass on: a status outside 200-599, or no answer at all. */
function invalidAnswer(): NodeJS.ErrnoException {
  return Object.assign(new Error('no valid answer'), { code: 'EINVALIDANSWER' })
}

/**
 * A whole HTTP/1.1 answer written on a raw socket (for CONNECT and upgrades, where Node
 * gives the proxy the socket rather than a response object); the connection closes after.
 */
export function rawResponse(status: number, headers: string[], body: string): string {
  const all = [
    ...headers,
    'Content-Type',
    'text/plain',
    'Content-Length',
    String(Buffer.byteLength(body)),
    'Connection',
    'close',
  ]
  return rawHead(status, all) + body
}
