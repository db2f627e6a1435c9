import type { Server } from 'node:http'

/**
 * Stop cleanly on SIGINT/SIGTERM: stop accepting connections, let requests in flight
 * finish for up to `graceMs`, then run `cleanup` and exit 0. A second signal exits at once.
 *
 * @example
 * ```ts
 * onShutdown(server, () => berth.close(), { log: console.log })
 * ```
 */
export function onShutdown(
  server: Server,
  cleanup: () => Promise<void>,
  options: { graceMs?: number; log?: (line: string) => void } = {},
): void {
  const { graceMs = 5_000, log = console.log } = options
  let stopping = false
  const stop = async (signal: NodeJS.Signals) => {
    if (stopping) {
      log(`${signal} again: exiting now`)
      process.exit(1)
    }
    stopping = true
    log(`${signal}: shutting down`)
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    server.closeIdleConnections()
    // Long-lived connections (WebSockets, slow clients) must not hold the exit forever.
    const force = setTimeout(() => server.closeAllConnections(), graceMs)
    force.unref()
    await closed
    clearTimeout(force)
    try {
      await cleanup()
    } catch (err) {
      log(`cleanup failed: ${(err as Error).message}`)
      process.exit(1)
    }
    log('stopped')
    process.exit(0)
  }
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
}
