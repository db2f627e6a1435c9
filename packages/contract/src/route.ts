import type * as v from 'valibot'
import type { ErrorCode } from './errors.js'

/** HTTP methods routes use. */
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/**
 * Who may call a route: `public` (no credentials), `caller` (any authenticated caller),
 * `admin` (a caller with role `admin` or the deployment's operator token).
 */
export type AuthLevel = 'public' | 'caller' | 'admin'

type AnySchema = v.GenericSchema

/** How a `multipart/form-data` route's form is documented. */
export interface MultipartBody {
  /** Text fields by name, each with its description; all required. */
  fields: Record<string, string>
  /** The file parts: any part with a filename is a file; documented as the array field `files`. */
  files: string
}

/**
 * One operation of the HTTP API, declared once: what it is called, where it lives, who may
 * call it and the shapes it takes and answers. The server attaches the handler.
 */
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
  /** An absent body is read as `{}` (every field of `body` optional); a body that is there is still validated. */
  bodyOptional?: true
  /**
   * A `multipart/form-data` request body instead of JSON (uploads). The pipeline caps it
   * at the server's upload limit (413 beyond it, whether declared or counted as it
   * streams) and hands it over unread: the handler reads the parts from `request.body`.
   */
  multipart?: MultipartBody
  /**
   * The handler reads a JSON body itself (a signature over its raw bytes, a size limit of its
   * own): the pipeline leaves it unread. The text describes it in the document.
   */
  rawBody?: string
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
  /** The messages of the upgraded connection, each side one schema (documented as `x-websocket`). */
  messages?: { client: AnySchema; server: AnySchema }
  /** Skip the per-caller rate limit (e.g. health checks). */
  unlimited?: boolean
  /** Path parameters that are credentials: logged as `[redacted]` (e.g. a webhook secret in the URL). */
  secretParams?: readonly string[]
}

/** Any route declaration (the table's element type): a table mixes routes of every shape. */
export type AnyRoute = RouteDef<
  string,
  HttpMethod,
  string,
  AuthLevel,
  AnySchema | undefined,
  AnySchema | undefined,
  AnySchema | undefined,
  AnySchema | undefined
>

/**
 * Declare one operation: method, path, auth level and schemas. The server attaches its
 * handler and mounts it, the OpenAPI document describes it, the client calls it and the
 * contract tests probe it, all from this one declaration.
 *
 * @example
 * ```ts
 * export const getProfile = defineRoute({
 *   name: 'profiles.get', method: 'GET', path: '/v1/profiles/:id', auth: 'caller',
 *   tag: 'profiles', summary: 'Read one profile',
 *   params: IdParams('profile'), response: Profile,
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
