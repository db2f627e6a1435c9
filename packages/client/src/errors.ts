import type { ErrorCode } from '@berth/contract'

/**
 * Codes the client itself assigns when there is no Berth error body to read:
 * - `NETWORK_ERROR`: no response at all (refused, reset, DNS); `status` 0.
 * - `TIMEOUT`: the per-attempt `timeout` elapsed; `status` 0.
 * - `ABORTED`: the caller's `signal` aborted; `status` 0.
 * - `HTTP_ERROR`: a non-2xx response without Berth's `{ error, code }` body (e.g. a proxy's
 *   HTML 502); `status` is the response's.
 */
export type ClientErrorCode = 'NETWORK_ERROR' | 'TIMEOUT' | 'ABORTED' | 'HTTP_ERROR'

/** A server code from core's table, a client code, or (from a newer server) any string. */
export type BerthErrorCode = ErrorCode | ClientErrorCode | (string & {})

/** What a {@link BerthError} is built from. */
export interface BerthErrorInit {
  status: number
  code: BerthErrorCode
  details?: Record<string, unknown> | undefined
  /** The parsed response body, if any. */
  body?: unknown
  /** The operation name, e.g. `profiles.get`. */
  route: string
  method: string
  url: string
  /** Response headers (e.g. `retry-after`), when there was a response. */
  headers?: Headers | undefined
  cause?: unknown
}

/**
 * Every failed call rejects with a `BerthError`: the HTTP status, Berth's error `code`
 * and `details` (e.g. `details.issues` on a 400), and the raw body. Errors without a
 * response have `status` 0 and a {@link ClientErrorCode}.
 *
 * @example
 * ```ts
 * try {
 *   await client.profiles.get({ params: { id } })
 * } catch (err) {
 *   if (err instanceof BerthError && err.code === 'NOT_FOUND') return null
 *   throw err
 * }
 * ```
 */
export class BerthError extends Error {
  readonly status: number
  readonly code: BerthErrorCode
  readonly details: Record<string, unknown> | undefined
  readonly body: unknown
  readonly route: string
  readonly method: string
  readonly url: string
  readonly headers: Headers | undefined

  constructor(message: string, init: BerthErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause })
    this.name = 'BerthError'
    this.status = init.status
    this.code = init.code
    this.details = init.details
    this.body = init.body
    this.route = init.route
    this.method = init.method
    this.url = init.url
    this.headers = init.headers
  }
}

/**
 * True for a {@link BerthError}, also one from another copy of this package.
 *
 * @example
 * ```ts
 * if (isBerthError(err) && err.status === 429) await wait(err.headers?.get('retry-after'))
 * ```
 */
export function isBerthError(value: unknown): value is BerthError {
  return (
    value instanceof BerthError ||
    (value instanceof Error &&
      value.name === 'BerthError' &&
      typeof (value as { status?: unknown }).status === 'number')
  )
}
