/** JSON responses and the error response every route and the server share. */
import { isApiError, type ApiError, type ErrorBody } from '@berth/contract'
import { asAnswer } from '../coordination/unavailable.js'
import type { Logger } from '../ports/logger.js'

const JSON_TYPE = 'application/json; charset=utf-8'

/**
 * A JSON response.
 *
 * @example
 * ```ts
 * return json({ ok: true }, 200)
 * ```
 */
export function json(
  body: unknown,
  status = 200,
  headers?: Record<string, string>,
  R: typeof Response = Response,
): Response {
  return new R(JSON.stringify(body), { status, headers: { 'content-type': JSON_TYPE, ...headers } })
}

/**
 * The error response for anything thrown: an {@link ApiError} keeps its code; a coordination
 * outage is a 503 with `Retry-After`; anything else is logged and answered as a generic 500
 * that reveals nothing.
 *
 * @example
 * ```ts
 * errorResponse(new ApiError('NOT_FOUND', 'no such route'))
 * ```
 */
export function errorResponse(
  err: unknown,
  logger?: Logger,
  headers?: Record<string, string>,
  R: typeof Response = Response,
): Response {
  err = asAnswer(err)
  if (isApiError(err)) return json(err.toJSON(), err.status, { ...headers, ...err.headers }, R)
  logger?.error('unhandled error', { error: err instanceof Error ? (err.stack ?? err.message) : String(err) })
  const body: ErrorBody = { error: 'Internal server error', code: 'INTERNAL_ERROR' }
  return json(body, 500, headers, R)
}
