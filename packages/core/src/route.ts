import type * as v from 'valibot'
import type { ErrorCode } from './errors.js'
import type { Caller } from './caller.js'
import type { Services } from './services.js'

export type { Caller } from './caller.js'

/** HTTP methods routes use. */
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/**
 * Who may call a route: `public` (no credentials), `caller` (any authenticated caller),
 * `admin` (a caller with role `admin` or the deployment's operator token).
 */
export type AuthLevel = 'public' | 'caller' | 'admin'

type AnySchema = v.GenericSchema
type Out<S> = S extends AnySchema ? v.InferOutput<S> : undefined
type Result<S> = S extends AnySchema ? v.InferOutput<S> : void

/** What a handler receives: the validated input, the caller and the services. */
export interface RouteContext<P, Q, B, A extends AuthLevel> {
  caller: A extends 'public' ? Caller | null : Caller
  params: P
  query: Q
  body: B
  services: Services
  /** The original web request (headers, client info). */
  request: Request
}

/** How a `multipart/form-data` route's form is documented. */
export interface MultipartBody {
  /** Text fields by name, each with its description; all required. */
  fields: Record<string, string>
  /** The file parts: any part with a filename is a file; documented as the array field `files`. */
  files: string
}

/** The value a handler returns: the response body, or a web `Response` for non-JSON routes. */
export type RouteResult<R> = R | Response

/** One operation of the HTTP API, defined once. */
export interface RouteDef<
  Name extends string = string,
  M extends HttpMethod = HttpMethod,
  Path extends string = string,
  A extends AuthLevel = AuthLevel,
  P extends AnySchema | undefined = AnySchema | undefined,
  Q extends AnySchema | undefined = AnySchema | undefined,
  B extends AnySchema | undefined = AnySchema | undefined,
  R extends AnySchema | undefined = AnySchema | undefined,
> {
  /** Dotted operation name, e.g. `profiles.get`: the OpenAPI operationId and the client method. */
  name: Name
  method: M
  /** Path with `:param` segments, e.g. `/v1/profiles/:id`. */
  path: Path
  auth: A
  /** OpenAPI tag (the resource area). */
  tag: string
  summary: string
  description?: string
  params?: P
  query?: Q
  /** JSON request body. Bodies are strict: unknown fields are a 400. */
  body?: B
  /**
   * A `multipart/form-data` request body instead of JSON (uploads). The pipeline caps it
   * at the server's upload limit (413 beyond it, whether declared or counted as it
   * streams) and hands it over unread: the handler reads the parts from `request.body`.
   */
  multipart?: MultipartBody
  /** JSON response body; omit for 204 or non-JSON routes. */
  response?: R
  /** Success status (default 200). */
  status?: 200 | 201 | 202 | 204 | 302
  /** Content type of a non-JSON success response (e.g. `text/html`, `application/x-tar`). */
  produces?: string
  /** Error codes this route answers with beyond the ones every route of its auth level has. */
  errors?: ErrorCode[]
  /** A protocol the route switches to (`websocket`): documented as a 101 answer. */
  upgrade?: string
  /** Skip the per-caller rate limit (e.g. health checks). */
  unlimited?: boolean
  /** Path parameters that are credentials: logged as `[redacted]` (e.g. a webhook secret in the URL). */
  secretParams?: readonly string[]
  handle: (ctx: RouteContext<Out<P>, Out<Q>, Out<B>, A>) => Promise<RouteResult<Result<R>>> | RouteResult<Result<R>>
}

/** Any route definition (the table's element type). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRoute = RouteDef<string, HttpMethod, string, AuthLevel, any, any, any, any>

/**
 * Define one operation: method, path, auth level, schemas and handler. The server mounts
 * it, the OpenAPI document describes it, the client calls it and the contract tests probe
 * it, all from this one definition.
 *
 * @example
 * ```ts
 * export const getProfile = defineRoute({
 *   name: 'profiles.get', method: 'GET', path: '/v1/profiles/:id', auth: 'caller',
 *   tag: 'profiles', summary: 'Read one profile',
 *   params: IdParams('profile'), response: Profile,
 *   handle: ({ caller, params, services }) => services.profiles.get(caller, params.id),
 * })
 * ```
 */
export function defineRoute<
  const Name extends string,
  const M extends HttpMethod,
  const Path extends string,
  const A extends AuthLevel,
  P extends AnySchema | undefined = undefined,
  Q extends AnySchema | undefined = undefined,
  B extends AnySchema | undefined = undefined,
  R extends AnySchema | undefined = undefined,
>(def: RouteDef<Name, M, Path, A, P, Q, B, R>): RouteDef<Name, M, Path, A, P, Q, B, R> {
  return def
}
