/**
 * The error model: one `ApiError` class and one code → HTTP status table, exactly the
 * service spec's error table. Every error body on the wire is `{ error, code, details? }`.
 */

/** Every error code Berth answers with, mapped to its HTTP status. */
export const ERROR_STATUS = {
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  /** The resource is in use (e.g. a model credential profiles still use). */
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  /** A body sent with a content type the operation does not take (or none). */
  UNSUPPORTED_MEDIA_TYPE: 415,
  /** A WebSocket endpoint asked without `Upgrade: websocket`. */
  UPGRADE_REQUIRED: 426,
  VALIDATION_FAILED: 400,
  RATE_LIMITED: 429,
  CONCURRENCY_LIMIT: 429,
  BUDGET_EXCEEDED: 402,
  TURN_LIMIT_EXCEEDED: 422,
  CONTAINER_FAILED: 502,
  MODEL_ERROR: 502,
  BAD_GATEWAY: 502,
  INTERNAL_ERROR: 500,
  /** The instance cannot take this request now (coordination backend unreachable, draining); retry after `Retry-After`. */
  SERVICE_UNAVAILABLE: 503,
} as const

/** A Berth error code, e.g. `'NOT_FOUND'`. */
export type ErrorCode = keyof typeof ERROR_STATUS

/** The JSON body of every error response. */
export interface ErrorBody {
  error: string
  code: ErrorCode
  details?: Record<string, unknown>
}

/** One field-level validation problem, carried in `details.issues`. */
export interface ValidationIssue {
  /** Where the bad value came from (`path`: the request path itself, e.g. a `..` segment). */
  location: 'body' | 'query' | 'params' | 'headers' | 'path'
  /** Dotted path to the field, e.g. `profile_ids.0`; empty for the whole input. */
  path: string
  message: string
}

/**
 * The one error type services and routes throw. The server turns it into a response with
 * the status from {@link ERROR_STATUS} and the `{ error, code, details }` body.
 *
 * @example
 * ```ts
 * throw new ApiError('NOT_FOUND', 'Profile prof_123 not found')
 * throw new ApiError('CONCURRENCY_LIMIT', 'Profile is at its limit', { limit: 5, running: 5 })
 * ```
 */
export class ApiError extends Error {
  readonly code: ErrorCode
  readonly status: number
  readonly details?: Record<string, unknown>
  /** Extra response headers, e.g. `Retry-After` on a 429. */
  readonly headers?: Record<string, string>
  /**
   * The resource a {@link notFound} error names (its kind and the id asked for): never sent,
   * read by the server to count requests for ids a caller does not have.
   */
  resource?: { kind: string; id: string }

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, headers?: Record<string, string>) {
    super(message)
    this.name = 'ApiError'
    this.code = code
    this.status = ERROR_STATUS[code]
    if (details !== undefined) this.details = details
    if (headers !== undefined) this.headers = headers
  }

  /** The wire body of this error. */
  toJSON(): ErrorBody {
    return this.details === undefined
      ? { error: this.message, code: this.code }
      : { error: this.message, code: this.code, details: this.details }
  }
}

/**
 * True for an {@link ApiError}, also across module copies (checks the shape, not the class).
 *
 * @example
 * ```ts
 * try { await run() } catch (err) { if (isApiError(err)) console.log(err.code) }
 * ```
 */
export function isApiError(value: unknown): value is ApiError {
  return (
    value instanceof ApiError ||
    (typeof value === 'object' &&
      value !== null &&
      (value as { name?: unknown }).name === 'ApiError' &&
      typeof (value as { code?: unknown }).code === 'string' &&
      (value as { code: string }).code in ERROR_STATUS)
  )
}

/**
 * A 400 VALIDATION_FAILED error for one or more field problems.
 *
 * @example
 * ```ts
 * throw validationError([{ location: 'body', path: 'slug', message: 'slug "docs" is taken' }])
 * ```
 */
export function validationError(issues: ValidationIssue[], message?: string): ApiError {
  const first = issues[0]
  const text =
    message ??
    (first
      ? `Invalid ${first.location}${first.path ? ` field "${first.path}"` : ''}: ${first.message}`
      : 'Invalid input')
  return new ApiError('VALIDATION_FAILED', text, { issues })
}

/**
 * A 404 NOT_FOUND for a resource id. Used for absent ids and other owners' ids alike, so
 * existence is never revealed.
 *
 * @example
 * ```ts
 * throw notFound('profile', 'prof_abc')
 * ```
 */
export function notFound(kind: string, id: string): ApiError {
  const err = new ApiError('NOT_FOUND', `${kind} ${id} not found`)
  err.resource = { kind, id }
  return err
}
