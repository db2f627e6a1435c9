import type { Server } from 'node:http'
import type { Socket } from 'node:net'

/** Options of {@link onShutdown}. */
export interface ShutdownOptions {
  /** The whole shutdown's budget: the process exits within it whatever clients do (default 5 s). */
  graceMs?: number
  /** Close WebSockets with 1001; `force` drops the ones whose client never answered. */
  closeWebSockets?: (opts: { force: boolean }) => void
  /** Stop being ready at once (readiness probes answer 503 while requests in flight finish). */
  drain?: () => void
  log?: (line: string) => void
  /** How the process ends (default `process.exit`); tests pass their own. */
  exit?: (code: number) => void
  /** A signal within this long of the first is the same one, passed on by a process manager (default 1 s). */
  sameSignalMs?: number
}

/**
 * Stop cleanly on SIGINT/SIGTERM, within `graceMs` whatever clients do:
 * 1. stop accepting connections, close idle keep-alive connections, and close every
 *    WebSocket with 1001 (going away);
 * 2. let requests in flight finish for up to 60% of the grace, then drop every connection
 *    still open (upgraded sockets included, which `server.close()` would wait for forever);
 * 3. run `cleanup` (Berth's close: tasks still running are left to the next start's
 *    recovery, warm containers stay for it to adopt) and exit 0; exit 1 when cleanup fails
 *    or does not finish within the grace. A second signal (`sameSignalMs` after the first
 *    or later) exits at once. Returns a function that stops listening for the signals.
 *
 * @example
 * ```ts
 * onShutdown(server, () => berth.close(), { closeWebSockets: (o) => berth.closeWebSockets(o) })
 * ```
 */
export function onShutdown(server: Server, cleanup: () => Promise<void>, options: ShutdownOptions = {}): () => void {
  const {
    graceMs = 5_000,
    log = console.log,
    exit = (code: number) => process.exit(code),
    sameSignalMs = 1_000,
  } = options
  // Every socket, upgraded ones included: the HTTP server forgets those once upgraded.
  const sockets = new Set<Socket>()
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  let stopping: number | null = null
  const stop = async (signal: NodeJS.Signals) => {
    if (stopping !== null) {
      // `pnpm start` passes the signal its process group already got on to this process: a
      // repeat that close to the first is the same request, not a second Ctrl-C.
      if (performance.now() - stopping < sameSignalMs) return
      log(`${signal} again: exiting now`)
      return exit(1)
    }
    stopping = performance.now()
    log(`${signal}: shutting down (grace ${graceMs} ms)`)
    options.drain?.()
    const deadline = setTimeout(() => {
      log('shutdown did not finish within the grace period: exiting; running tasks are recovered at the next start')
      exit(1)
    }, graceMs)
    deadline.unref()
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    server.closeIdleConnections()
    options.closeWebSockets?.({ force: false })
    const force = setTimeout(
      () => {
        if (sockets.size) log(`dropping ${sockets.size} connection(s) still open`)
        options.closeWebSockets?.({ force: true })
        server.closeAllConnections()
        for (const socket of sockets) socket.destroy()
      },
      Math.round(graceMs * 0.6),
    )
    force.unref()
    await closed
    clearTimeout(force)
    try {
      await cleanup()
    } catch (err) {
      log(`cleanup failed: ${(err as Error).message}`)
      clearTimeout(deadline)
      return exit(1)
    }
    clearTimeout(deadline)
    log('stopped')
    exit(0)
  }
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
  return () => {
    process.off('SIGINT', stop)
    process.off('SIGTERM', stop)
  }
}
