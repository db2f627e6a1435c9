import { createServer, connect, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'

/**
 * A TCP proxy on 127.0.0.1 in front of a local server, so a test can cut every connection
 * (HTTP and WebSocket alike) the way a flaky network or a restarting load balancer would.
 */
export async function startProxy(target: string, opts: { refuseUpgrades?: boolean } = {}) {
  const { hostname, port } = new URL(target)
  const open = new Set<Socket>()
  let upgrades = 0
  const server = createServer((client) => {
    const upstream = connect(Number(port), hostname)
    open.add(client)
    open.add(upstream)
    // Look at the request line and headers first: a refused upgrade never reaches the server.
    client.once('data', (chunk: Buffer) => {
      if (/^upgrade:\s*websocket/im.test(chunk.toString('latin1'))) {
        upgrades++
        // Like a proxy that does not pass WebSockets through.
        if (opts.refuseUpgrades) {
          // (The upstream goes when the client closes.)
          client.end('HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n')
          return
        }
      }
      upstream.write(chunk)
      client.pipe(upstream).pipe(client)
    })
    const drop = () => {
      client.destroy()
      upstream.destroy()
      open.delete(client)
      open.delete(upstream)
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** WebSocket upgrade requests seen so far. */
    upgrades: () => upgrades,
    /** Cut every open connection at once; new ones are accepted again. */
    dropAll(): number {
      const n = open.size
      for (const s of open) s.destroy()
      open.clear()
      return n
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy()
        server.close(() => r())
      }),
  }
}
