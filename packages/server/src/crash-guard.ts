/**
 * The last-resort guard of a server process: an exception nothing caught, raised by Node about
 * one connection while a server served it, ends that connection instead of the process. Every
 * other exception still ends the process, as Node would. The standalone server installs it;
 * an embedder opts in (its process handlers are its own). docs/OPERATIONS.md, "Uncaught exceptions".
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import type { IncomingMessage, Server } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Metrics } from '@berth/core'

type Context = 'request' | 'upgrade' | 'connect'

/** The connection a server was serving when the code now running was started. */
const serving = new AsyncLocalStorage<{ context: Context; socket: Duplex }>()

/**
 * Node's own errors about one connection's bytes or state: a status, header or path Node
 * refuses to write, a stream written after its end or destroyed, a socket reset, refused or
 * closed, an HTTP parse error, a TLS failure. Node raises them before anything is written or
 * once that connection is broken, so they leave nothing behind but that connection.
 */
const CONNECTION_ERROR =
  /^(?:ERR_HTTP_\w+|ERR_STREAM_\w+|ERR_SOCKET_\w+|ERR_TLS_\w+|ERR_SSL_\w+|HPE_\w+|ERR_INVALID_CHAR|ERR_INVALID_HTTP_TOKEN|ERR_UNESCAPED_CHARACTERS|ECONNRESET|EPIPE|ECONNREFUSED|ECONNABORTED|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH)$/

let installed = false
const marked = new WeakSet<Server>()

/**
 * Mark what `server` serves for the guard: each request, upgrade and `CONNECT` (and whatever
 * its handling starts: upstream requests, their sockets, timers) runs in that connection's
 * scope. Costs one check per request while no guard is installed. Berth's own servers (the
 * credential broker's gateway and egress proxy) are marked where they are made.
 */
export function serveGuarded(server: Server): void {
  if (marked.has(server)) return
  marked.add(server)
  // Prepended, so the scope is entered before any handler runs; it lasts for the rest of
  // this connection's callbacks until its next request enters its own.
  server.prependListener('request', (req: IncomingMessage) => {
    if (installed) serving.enterWith({ context: 'request', socket: req.socket })
  })
  const enter = {
    upgrade: (_req: IncomingMessage, socket: Duplex) => {
      if (installed) serving.enterWith({ context: 'upgrade', socket })
    },
    connect: (_req: IncomingMessage, socket: Duplex) => {
      if (installed) serving.enterWith({ context: 'connect', socket })
    },
  }
  // A server with no `upgrade` or `connect` listener treats such requests its own way (an
  // upgrade as a plain request, a CONNECT closed): the scope joins only a listener the server has.
  const joined = new Set<string | symbol>()
  const join = (event: string | symbol) => {
    if ((event !== 'upgrade' && event !== 'connect') || joined.has(event)) return
    joined.add(event)
    server.prependListener(event, enter[event])
  }
  if (server.listenerCount('upgrade') > 0) join('upgrade')
  if (server.listenerCount('connect') > 0) join('connect')
  server.on('newListener', join)
}

/** Options of {@link guardUncaught}. */
export interface GuardOptions {
  /** Counts each contained exception (`berth_uncaught_errors_total`); `berth.metrics`. */
  metrics?: Pick<Metrics, 'uncaughtError'>
  /** Where the guard writes (default `console.error`). */
  log?: (line: string) => void
  /** How the process ends (default `process.exit`); tests pass their own. */
  exit?: (code: number) => void
}

/**
 * Install the process's last-resort guard (one per process) and mark `server` for it. An
 * uncaught exception is contained (its connection destroyed, a line logged, the counter
 * increased, the process kept serving) only when both hold: it was thrown in the scope of a
 * connection a marked server was serving, and it is one of Node's own errors about one
 * connection (a code such as `ERR_INVALID_CHAR`, `ERR_HTTP_INVALID_STATUS_CODE`,
 * `ERR_STREAM_WRITE_AFTER_END`, `ECONNRESET`, `EPIPE`, `HPE_*`). Anything else (an exception
 * outside a connection's scope, any other error, an unhandled promise rejection) is logged
 * with its stack and ends the process with code 1, as Node would. Returns the uninstaller.
 *
 * @example
 * ```ts
 * const server = createServer(berth.handler)
 * server.on('upgrade', berth.handleUpgrade)
 * guardUncaught(server, { metrics: berth.metrics })
 * ```
 */
export function guardUncaught(server: Server, options: GuardOptions = {}): () => void {
  if (installed) throw new Error('guardUncaught: a guard is already installed in this process')
  const { metrics, log = console.error, exit = (code: number) => process.exit(code) } = options
  serveGuarded(server)
  const onUncaught = (err: unknown, origin: NodeJS.UncaughtExceptionOrigin) => {
    const code = (err as NodeJS.ErrnoException | null)?.code
    // A rejection is raised outside the code that made the promise: never contained.
    const scope = origin === 'uncaughtException' ? serving.getStore() : undefined
    const stack = err instanceof Error ? (err.stack ?? String(err)) : String(err)
    if (scope && typeof code === 'string' && CONNECTION_ERROR.test(code)) {
      scope.socket.destroy()
      try {
        metrics?.uncaughtError(scope.context)
      } catch {
        // A metric that fails must not turn a contained exception into an exit.
      }
      log(`berth: contained an uncaught ${code} while serving a ${scope.context}: ended that connection\n${stack}`)
      return
    }
    const where = scope ? `while serving a ${scope.context}, not a connection error` : 'outside any connection'
    log(`berth: uncaught exception (${origin}, ${where}): exiting\n${stack}`)
    exit(1)
  }
  process.on('uncaughtException', onUncaught)
  installed = true
  return () => {
    process.off('uncaughtException', onUncaught)
    installed = false
  }
}
