import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import type { Duplex } from 'node:stream'
import type { EgressRefusal } from '@berth/core'
import type { BrokerCa } from './broker-ca.js'
import { type ForwardContext, forwardRequest, rawResponse } from './proxy-forward.js'
import { injectionFor, needsInjection, type ProxyGrant, rewriteRequestHeaders } from './proxy-grant.js'
import { createInterceptor } from './proxy-intercept.js'
import { checkDestination, type Destination, type ProxyLookup, systemLookup } from './proxy-policy.js'
import { listenOnSocket } from './socket.js'

export type { BrokerCa } from './broker-ca.js'
export { loadOrCreateBrokerCa } from './broker-ca.js'
export type { ProxyGrant } from './proxy-grant.js'
export type { ProxyLookup, RefusalCode } from './proxy-policy.js'

/** How to run the egress proxy (see {@link startEgressProxy}). */
export interface EgressProxyOptions {
  /** The unix socket to listen on (mode 0666, so every container user can connect); a stale file there is removed first. */
  socketPath: string
  /** Signs the leaf certificates of intercepted hosts. */
  ca: BrokerCa
  /** The grant of a token (the password of `Proxy-Authorization: Basic`); `null` answers 407. */
  authorize(token: string): Promise<ProxyGrant | null>
  /** Extra roots trusted for upstream TLS (beside the system's), e.g. a test CA. */
  upstreamCa?: string[]
  /** Resolves host names (the system resolver by default). */
  lookup?: ProxyLookup
  /** Refusals and upstream failures; never a header value, token or secret. */
  logger?: { warn(msg: string, fields?: object): void }
  /** Told of every destination refused (the audit log counts them); must not throw. */
  onRefused?: (refusal: EgressRefusal) => void
}

/** A running egress proxy. */
export interface EgressProxy {
  socketPath: string
  /** Stop listening and end every connection, tunnels included. */
  close(): Promise<void>
}

/**
 * Start the egress proxy on a unix socket: every request needs a task's token in
 * `Proxy-Authorization`; its network policy is applied by host name; `CONNECT` tunnels to
 * hosts with brokered secrets or a Git account are decrypted (a leaf signed by `ca`) so
 * placeholders in headers can be replaced by their values for those hosts only; other
 * tunnels pass through untouched. Plain `http://` requests get the same policy and
 * rewriting.
 *
 * @example
 * ```ts
 * const proxy = await startEgressProxy({
 *   socketPath: '/run/berth/proxy/proxy.sock',
 *   ca: await loadOrCreateBrokerCa('/var/lib/berth/broker'),
 *   authorize: async (token) => grants.get(token) ?? null,
 * })
 * // in the container: HTTPS_PROXY=http://berth:<token>@127.0.0.1:<port forwarded to the socket>
 * await proxy.close()
 * ```
 */
export async function startEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const lookup = options.lookup ?? systemLookup
  const warn = (msg: string, fields?: object) => options.logger?.warn(msg, fields)
  const sockets = new Set<Duplex>()
  const track = (socket: Duplex) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  }
  const ctx: ForwardContext = { upstreamCa: options.upstreamCa ?? [], warn, track }
  const interceptor = createInterceptor(options.ca, ctx)

  /** The grant of the request's token, or the answer that refuses it. */
  async function grantOf(req: IncomingMessage): Promise<ProxyGrant | { status: 407 | 503; reason: string }> {
    const token = proxyToken(req.headers['proxy-authorization'])
    if (token === null) return { status: 407, reason: 'this proxy needs a task token' }
    try {
      return (await options.authorize(token)) ?? { status: 407, reason: 'this task token is not valid' }
    } catch (err) {
      warn('egress proxy: looking up a token failed', { error: err instanceof Error ? err.name : 'unknown' })
      return { status: 503, reason: 'the proxy could not check this token' }
    }
  }

  function refused(grant: ProxyGrant, dest: Exclude<Destination, { ok: true }>, host: string, port: number) {
    warn('egress proxy: request refused', { task_id: grant.task_id, host, status: dest.status, reason: dest.reason })
    const { task_id, owner_id } = grant
    options.onRefused?.({ task_id, owner_id, host, port, status: dest.status, code: dest.code, reason: dest.reason })
  }

  async function onConnect(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy())
    const grant = await grantOf(req)
    if ('status' in grant) return void socket.end(rejection(grant.status, grant.reason))
    const authority = parseAuthority(req.url ?? '')
    if (!authority) return void socket.end(rawResponse(400, [], 'CONNECT needs host:port\n'))
    const dest = await checkDestination(grant.egress, authority.host, authority.port, lookup)
    if (!dest.ok) {
      refused(grant, dest, authority.host, authority.port)
      return void socket.end(rejection(dest.status, dest.reason))
    }
    const injection = injectionFor(grant, dest.host, dest.port, true)
    if (needsInjection(injection)) {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      const target = {
        task_id: grant.task_id,
        host: dest.host,
        port: dest.port,
        address: dest.address,
        tls: true,
        injection,
      }
      interceptor.intercept(socket, head, target)
      return
    }
    tunnel(socket, head, dest.address, dest.port, grant.task_id, dest.host)
  }

  function tunnel(socket: Duplex, head: Buffer, address: string, port: number, taskId: string, host: string): void {
    const upstream = connect({ host: address, port })
    track(upstream)
    let connected = false
    upstream.once('connect', () => {
      connected = true
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n')
      if (head.length > 0) upstream.write(head)
      upstream.pipe(socket).pipe(upstream)
    })
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      warn('egress proxy: tunnel failed', { task_id: taskId, host, code: err.code })
      if (connected) socket.destroy()
      else socket.end(rejection(502, `the proxy could not reach ${host}:${port} (${err.code ?? 'error'})`))
    })
    // An upstream that ends is ended towards the client by the pipe, after its last bytes;
    // a client that goes away takes the upstream connection with it.
    socket.on('close', () => upstream.destroy())
  }

  async function onPlain(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const grant = await grantOf(req)
    if ('status' in grant) return void answer(res, grant.status, grant.reason)
    let url: URL
    try {
      url = new URL(req.url ?? '')
    } catch {
      return void answer(res, 400, 'this proxy takes absolute http:// URLs and CONNECT')
    }
    if (url.protocol !== 'http:') return void answer(res, 400, 'this proxy takes absolute http:// URLs and CONNECT')
    const dest = await checkDestination(grant.egress, url.hostname, Number(url.port || 80), lookup)
    if (!dest.ok) {
      refused(grant, dest, url.hostname, Number(url.port || 80))
      return void answer(res, dest.status, dest.reason)
    }
    const injection = injectionFor(grant, dest.host, dest.port, false)
    const target = {
      task_id: grant.task_id,
      host: dest.host,
      port: dest.port,
      address: dest.address,
      tls: false,
      injection,
    }
    // The request line names the destination; its Host header is replaced by that name (RFC 9112 3.2.2).
    const headers = ['Host', url.host]
    const rewritten = rewriteRequestHeaders(req.rawHeaders, injection)
    for (let i = 0; i + 1 < rewritten.length; i += 2) {
      if (rewritten[i]!.toLowerCase() !== 'host') headers.push(rewritten[i]!, rewritten[i + 1]!)
    }
    req.url = `${url.pathname}${url.search}`
    forwardRequest(req, res, target, ctx, headers)
  }

  const server = createServer()
  server.on('connection', track)
  server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    onConnect(req, socket, head).catch(() => socket.destroy())
  })
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    onPlain(req, res).catch(() => res.destroy())
  })

  await listenOnSocket(server, options.socketPath, 'Berth egress proxy')

  return {
    socketPath: options.socketPath,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      interceptor.close()
      for (const socket of sockets) socket.destroy()
      await closed
    },
  }
}

function proxyToken(header: string | undefined): string | null {
  const match = header?.match(/^Basic\s+([A-Za-z0-9+/=]+)\s*$/i)
  if (!match) return null
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8')
  const colon = decoded.indexOf(':')
  const token = colon < 0 ? '' : decoded.slice(colon + 1)
  return token === '' ? null : token
}

function parseAuthority(text: string): { host: string; port: number } | null {
  const match = text.match(/^(\[[0-9a-fA-F:.]+\]|[^:/\s[\]]+):(\d{1,5})$/)
  return match ? { host: match[1]!, port: Number(match[2]) } : null
}

function challenge(status: number): string[] {
  return status === 407 ? ['Proxy-Authenticate', 'Basic realm="berth"'] : []
}

function rejection(status: number, reason: string): string {
  return rawResponse(status, challenge(status), `${reason}\n`)
}

function answer(res: ServerResponse, status: number, reason: string): void {
  const headers: Record<string, string> = { 'content-type': 'text/plain' }
  if (status === 407) headers['proxy-authenticate'] = 'Basic realm="berth"'
  res.writeHead(status, headers).end(`${reason}\n`)
}
