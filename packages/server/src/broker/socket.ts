import { chmod, lstat, unlink } from 'node:fs/promises'
import type { Server } from 'node:http'
import { connect } from 'node:net'
import { serveGuarded } from '../crash-guard.js'

/** True when something accepts connections on the socket. */
function answers(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(socketPath)
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

/** Make `socketPath` free to listen on: a stale socket goes; a live one or a file that is no socket is an error. */
async function claimSocketPath(socketPath: string, what: string): Promise<void> {
  const stat = await lstat(socketPath).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined
    throw err
  })
  if (!stat) return
  if (!stat.isSocket()) throw new Error(`${what}: ${socketPath} exists and is not a socket`)
  if (await answers(socketPath)) throw new Error(`${what}: another process listens on ${socketPath}`)
  await unlink(socketPath)
}

/**
 * Listen on a unix socket for the broker: the path claimed first (a stale socket from a
 * crash is replaced, a live one refused), then made world-writable, because containers run
 * as any user and the token, not the file mode, is what admits a request. What it serves
 * is marked for the process's last-resort guard, when one is installed (`crash-guard.ts`).
 *
 * @example
 * ```ts
 * await listenOnSocket(createServer(handler), '/var/lib/berth/broker/public/gateway.sock', 'Berth model gateway')
 * ```
 */
export async function listenOnSocket(server: Server, socketPath: string, what: string): Promise<void> {
  await claimSocketPath(socketPath, what)
  serveGuarded(server)
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(socketPath, () => {
      server.off('error', reject)
      resolve()
    })
  })
  await chmod(socketPath, 0o666)
}
