import { berthMiddleware, type Berth } from '@berth/server'

/**
 * Express middleware that hands Berth the requests for Berth's own paths and passes
 * everything else on to the host app: `@berth/server`'s {@link berthMiddleware}. Mount it
 * before any body parser: Berth reads request bodies itself.
 *
 * @example
 * ```ts
 * app.use(berthRoutes(berth))
 * app.use(express.json()) // the app's own routes after
 * ```
 */
export function berthRoutes(berth: Pick<Berth, 'handler' | 'routes'>) {
  return berthMiddleware(berth)
}
