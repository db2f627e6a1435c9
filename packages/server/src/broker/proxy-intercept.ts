import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { createSecureContext, TLSSocket } from 'node:tls'
import { serveGuarded } from '../crash-guard.js'
import type { BrokerCa } from './broker-ca.js'
import { type ForwardContext, type ForwardTarget, forwardRequest, forwardUpgrade } from './proxy-forward.js'
import { normalHost } from './proxy-grant.js'

/** Terminates TLS for the tunnels whose requests the proxy must read. */
export interface Interceptor {
  /** Take over a CONNECT tunnel already answered `200`: TLS with a leaf for `target.host`, then HTTP/1.1 inside. */
  intercept(socket: Duplex, head: Buffer, target: ForwardTarget): void
  close(): void
}

/**
 * One HTTP server, never listening, that reads the requests of every intercepted tunnel
 * (Node's own HTTP/1.1 parser, fed the decrypted TLS socket); each socket remembers the
 * destination its CONNECT was checked for.
 */
export function createInterceptor(ca: BrokerCa, ctx: ForwardContext): Interceptor {
  const targets = new WeakMap<Duplex, ForwardTarget>()
  const inner = createServer()
  serveGuarded(inner)

  inner.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const target = targets.get(req.socket)
    if (!target) {
      res.destroy()
      return
    }
    if (!originForm(req)) {
      res
        .writeHead(400, { 'content-type': 'text/plain' })
        .end('one Host header and a path-only request target, please\n')
      return
    }
    if (!sameAuthority(req.headers.host, target)) {
      // A request inside the tunnel for another name would reach that name's virtual host
      // on the checked address with this host's secrets: refused (RFC 9110 421).
      res.writeHead(421, { 'content-type': 'text/plain' }).end(`this connection is for ${target.host}:${target.port}\n`)
      return
    }
    forwardRequest(req, res, target, ctx)
  })
  inner.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const target = targets.get(socket)
    if (!target || !originForm(req) || !sameAuthority(req.headers.host, target)) {
      socket.destroy()
      return
    }
    forwardUpgrade(req, socket, head, target, ctx)
  })
  // Malformed HTTP inside a tunnel: answer 400 and close, as a server would.
  inner.on('clientError', (_err, socket: Duplex) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n')
    else socket.destroy()
  })

  return {
    intercept(socket, head, target) {
      const leaf = ca.leafFor(target.host)
      if (head.length > 0) socket.unshift(head)
      const tls = new TLSSocket(socket, {
        isServer: true,
        secureContext: createSecureContext({ cert: leaf.certPem, key: leaf.keyPem }),
        // HTTP/1.1 only: the proxy reads requests with Node's HTTP/1.1 parser.
        ALPNProtocols: ['http/1.1'],
      })
      targets.set(tls, target)
      // A client that does not trust the broker CA ends the handshake: nothing to forward.
      tls.on('error', () => tls.destroy())
      socket.on('close', () => tls.destroy())
      inner.emit('connection', tls)
    },
    close() {
      inner.close()
      inner.closeAllConnections()
    },
  }
}

// An absolute URL in the request line, or a second Host header, would let an upstream
// route the request by a name other than the one checked and whose secrets were added.
function originForm(req: IncomingMessage): boolean {
  const hosts = req.rawHeaders.filter((h, i) => i % 2 === 0 && h.toLowerCase() === 'host').length
  return hosts === 1 && (req.url === '*' || (req.url ?? '').startsWith('/'))
}

function sameAuthority(hostHeader: string | undefined, target: ForwardTarget): boolean {
  if (!hostHeader) return false
  const match = hostHeader.match(/^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/)
  if (!match) return false
  const port = match[2] === undefined ? (target.tls ? 443 : 80) : Number(match[2])
  return port === target.port && normalHost(match[1]!) === target.host
}
