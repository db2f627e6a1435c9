import type { ErrorKind } from './directives.js'

/** Anthropic's error `type` and HTTP status for each scriptable error kind. */
export const API_ERRORS: Record<ErrorKind, { type: string; status: number }> = {
  overloaded: { type: 'overloaded_error', status: 529 },
  api: { type: 'api_error', status: 500 },
  invalid: { type: 'invalid_request_error', status: 400 },
  auth: { type: 'authentication_error', status: 401 },
  rate_limit: { type: 'rate_limit_error', status: 429 },
}

/**
 * An error body in Anthropic's shape.
 *
 * @example
 * ```ts
 * errorBody('not_found_error', 'Not found: GET /v1/nope')
 * // { type: 'error', error: { type: 'not_found_error', message: 'Not found: GET /v1/nope' } }
 * ```
 */
export function errorBody(type: string, message: string): { type: 'error'; error: { type: string; message: string } } {
  return { type: 'error', error: { type, message } }
}
