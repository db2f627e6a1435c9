import type { Berth } from '@berth/server'
import type { NextFunction, Request, Response } from 'express'

/** `/v1/profiles/:id` → a RegExp matching concrete paths of that route. */
function routePattern(path: string): RegExp {
  const source = path
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/')
  return new RegExp(`^${source}/?$`)
}

/**
 * Express middleware that hands Berth the requests for Berth's own paths (every path of
 * its route table, and anything under `/v1/` and `/admin/` so unknown ones get Berth's JSON
 * 404) and passes everything else on to the host app. Mount it before any body parser:
 * Berth reads request bodies itself.
 *
 * @example
 * ```ts
 * app.use(berthRoutes(berth))
 * app.use(express.json()) // the app's own routes after
 * ```
 */
export function berthRoutes(berth: Pick<Berth, 'handler' | 'routes'>) {
  const patterns = berth.routes.map((route) => routePattern(route.path))
  const owns = (path: string) => /^\/(v1|admin)(\/|$)/.test(path) || patterns.some((re) => re.test(path))
  return (req: Request, res: Response, next: NextFunction) => {
    if (!owns(req.path)) return next()
    Promise.resolve(berth.handler(req, res)).catch(next)
  }
}
