/**
 * Redis outages for tests: a TCP proxy to Redis that can be severed and restored (Redis keeps
 * its data). A Redis that dies and comes back empty is testkit's `startRedis` (`kill`, `start`).
 */
import { createConnection, createServer, type Socket } from 'node:net'

/** A TCP proxy to a unix socket that a test can sever (every connection dropped, new ones refused) and restore. */
export interface SeverableProxy {
  /** `redis://127.0.0.1:<port>` */
  url: string
  sever(): void
  restore(): void
  close(): Promise<void>
}

/**
 * Forward `127.0.0.1:<free port>` to the unix socket `target`.
 *
 * @example
 * ```ts
 * const proxy = await severableProxy(redis.path)
 * proxy.sever() // the instance behind it is cut off from Redis
 * ```
 */
export async function severableProxy(target: string): Promise<SeverableProxy> {
  const open = new Set<Socket>()
  let cut = false
  const server = createServer((client) => {
    if (cut) {
      client.destroy()
      return
    }
    const upstream = createConnection(target)
    open.add(client).add(upstream)
    client.pipe(upstream).pipe(client)
    const end = () => {
      client.destroy()
      upstream.destroy()
      open.delete(client)
      open.delete(upstream)
    }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  return {
    url: `redis://127.0.0.1:${port}`,
    sever() {
      cut = true
      for (const s of open) s.destroy()
    },
    restore() {
      cut = false
    },
    close() {
      cut = true
      for (const s of open) s.destroy()
      return new Promise((r) => server.close(() => r()))
    },
  }
}
