import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Berth } from './berth-options.js'

/** A connect-style middleware (Express, Connect, Fastify's `onRequest` with the raw objects). */
export interface BerthMiddleware {
  (req: IncomingMessage, res: ServerResponse, next: (err?: Error) => void): void
  /** Whether Berth answers this path (a request path, query allowed). */
  owns(path: string): boolean
}

/** `/v1/profiles/:id` → a RegExp matching concrete paths of that route. */
function routePattern(path: string): RegExp {
  const source = path
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/')
  return new RegExp(`^${source}/?$`)
}

/**
 * Mount Berth beside an existing app: requests for Berth's paths (every path of its route
 * table, and anything under `/v1/` and `/admin/`, so unknown ones get Berth's JSON 404) go to
 * Berth's Node handler; everything else goes on to `next()`. Mount it before any body
 * parser: Berth reads request bodies itself. Pass `server.on('upgrade', berth.handleUpgrade)`
 * too for the WebSocket.
 *
 * @example
 * ```ts
 * // Express 5
 * app.use(berthMiddleware(berth))
 * app.use(express.json()) // the app's own routes after
 *
 * // Fastify 5: hand Berth's requests over before Fastify parses them
 * const berthMw = berthMiddleware(berth)
 * fastify.addHook('onRequest', (req, reply, done) => {
 *   if (!berthMw.owns(req.url)) return done()
 *   reply.hijack()
 *   berthMw(req.raw, reply.raw, done)
 * })
 * ```
 */
export function berthMiddleware(berth: Pick<Berth, 'handler' | 'routes'>): BerthMiddleware {
  const patterns = berth.routes.map((route) => routePattern(route.path))
  const owns = (url: string) => {
    const path = url.split('?', 1)[0]!
    return /^\/(v1|admin)(\/|$)/.test(path) || patterns.some((re) => re.test(path))
  }
  const middleware = (req: IncomingMessage, res: ServerResponse, next: (err?: Error) => void) => {
    if (!owns(req.url ?? '/')) return next()
    Promise.resolve(berth.handler(req, res)).catch((err: unknown) =>
      next(err instanceof Error ? err : new Error(String(err))),
    )
  }
  return Object.assign(middleware, { owns })
}
