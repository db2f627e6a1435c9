/** Who is calling: bearer tokens, and the request → caller function the pipeline and the WebSocket share. */
import type { Caller } from '../caller.js'
import type { Logger } from '../ports/logger.js'
import type { Services } from '../services.js'

/** Replaces bearer-key authentication: return the caller for a request, or `null` (401). */
export type Authenticate = (request: Request) => Caller | null | Promise<Caller | null>

/** What {@link createAuthenticate} needs: the embedder's function, or the services to check keys with. */
export interface AuthenticateOptions {
  /** Custom authentication; defaults to Berth caller keys and the operator token. */
  authenticate?: Authenticate | undefined
  services: Services
  logger: Logger
}

/**
 * The bearer token of a request (`Authorization: Bearer …`, or `?token=` when allowed).
 *
 * @example
 * ```ts
 * bearerToken(new Request('http://x/v1/ws?token=abc'), true) // 'abc'
 * ```
 */
export function bearerToken(request: Request, allowQuery = false): string | null {
  const header = request.headers.get('authorization')
  const m = header?.match(/^Bearer\s+(\S+)\s*$/i)
  if (m) return m[1]!
  if (allowQuery) return new URL(request.url).searchParams.get('token')
  return null
}

function isValidCaller(c: Caller): boolean {
  return typeof c.id === 'string' && /^[A-Za-z0-9_-]{1,128}$/.test(c.id) && (c.role === 'user' || c.role === 'admin')
}

/**
 * The request → caller function the pipeline and the WebSocket share: the embedder's
 * `authenticate`, or Berth caller keys and the operator token (`Authorization: Bearer`, and
 * `?token=` when `allowQuery`, for browsers opening a WebSocket). A caller whose id could
 * escape its storage key range is refused (and the embedder told why).
 *
 * @example
 * ```ts
 * const authenticate = createAuthenticate({ services, logger })
 * const caller = await authenticate(request) // Caller | null
 * ```
 */
export function createAuthenticate(opts: AuthenticateOptions, allowQuery = false): Authenticate {
  const base: Authenticate =
    opts.authenticate ??
    ((req) => {
      const token = bearerToken(req, allowQuery)
      return token ? opts.services.users.authenticate(token) : null
    })
  const check = (caller: Caller | null): Caller | null => {
    if (caller && !isValidCaller(caller)) {
      // Caller ids become part of storage keys: one with a ':' could reach into another
      // owner's key range. Refuse it as unauthenticated and tell the embedder why.
      opts.logger.warn(
        'authenticate() returned an invalid caller; ids must match ^[A-Za-z0-9_-]{1,128}$ and role be user or admin',
        {
          role: String(caller.role).slice(0, 20),
        },
      )
      return null
    }
    return caller
  }
  // A caller known without waiting (a cached key) is answered without a promise.
  return (request) => {
    const caller = base(request)
    return caller instanceof Promise ? caller.then(check) : check(caller)
  }
}
