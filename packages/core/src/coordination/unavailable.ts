/** What a request that needs the coordination backend answers while it is out of reach: 503 with `Retry-After`. */
import { ApiError } from '@berth/contract'
import { CoordinationUnavailableError, type Coordination } from './port.js'

/** Seconds a caller is asked to wait before retrying while coordination is unavailable. */
export const UNAVAILABLE_RETRY_AFTER_S = 5

/**
 * The 503 `SERVICE_UNAVAILABLE` answer, with `Retry-After` and `details.retry_after`.
 *
 * @example
 * ```ts
 * throw serviceUnavailable('Tasks cannot be submitted while the coordination backend is unreachable')
 * ```
 */
export function serviceUnavailable(message: string): ApiError {
  return new ApiError(
    'SERVICE_UNAVAILABLE',
    message,
    { retry_after: UNAVAILABLE_RETRY_AFTER_S },
    { 'retry-after': String(UNAVAILABLE_RETRY_AFTER_S) },
  )
}

/**
 * `err` as callers see it: a {@link CoordinationUnavailableError} becomes the 503 answer,
 * anything else stays as it is.
 *
 * @example
 * ```ts
 * errorResponse(asAnswer(err)) // 503 for a coordination outage
 * ```
 */
export function asAnswer(err: unknown): unknown {
  if (err instanceof CoordinationUnavailableError || (err as Error | null)?.name === 'CoordinationUnavailableError')
    return serviceUnavailable('The coordination backend is unreachable; retry shortly')
  return err
}

/**
 * Throws the 503 unless this instance reaches the coordination backend and holds its lease:
 * checked before a request that would start work changes anything.
 *
 * @example
 * ```ts
 * requireCoordination(coordination, 'Tasks cannot be submitted')
 * ```
 */
export function requireCoordination(coordination: Coordination, what: string): void {
  const { reachable, leased } = coordination.state()
  if (!reachable) throw serviceUnavailable(`${what} while the coordination backend is unreachable; retry shortly`)
  if (!leased) throw serviceUnavailable(`${what} while this instance is re-establishing its lease; retry shortly`)
}
