import type { BerthError } from './errors.js'
import type { RetryOptions } from './types.js'

/** Methods safe to send twice. POST and PATCH are never retried: a retry could act twice. */
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE'])

/** Statuses worth another attempt: rate limited, and a gateway or server that is briefly away. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504])

/** The retry policy with every default filled in. */
export type RetryPolicy = Required<RetryOptions>

/** Defaults: 2 retries, 250 ms doubling backoff, waits capped at 10 s. */
export const DEFAULT_RETRY: RetryPolicy = { retries: 2, delay: 250, maxDelay: 10_000 }

/**
 * Normalise the `retry` option: a number is the retry count, `false` turns retries off.
 *
 * @example
 * ```ts
 * retryPolicy(3) // { retries: 3, delay: 250, maxDelay: 10000 }
 * ```
 */
export function retryPolicy(option: RetryOptions | number | false | undefined, base: RetryPolicy = DEFAULT_RETRY): RetryPolicy {
  if (option === undefined) return base
  if (option === false) return { ...base, retries: 0 }
  if (typeof option === 'number') return { ...base, retries: Math.max(0, Math.floor(option)) }
  return { ...base, ...option }
}

/**
 * Seconds (or an HTTP date) from a `Retry-After` header, in ms; `undefined` when absent or
 * unreadable.
 *
 * @example
 * ```ts
 * retryAfterMs('2') // 2000
 * ```
 */
export function retryAfterMs(header: string | null | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined
  const trimmed = header.trim()
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.ceil(Number(trimmed) * 1000)
  const date = Date.parse(trimmed)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/**
 * How long to wait before retry number `attempt` (0-based) of a failed call, or
 * `undefined` when it must not be retried: the method is not idempotent, the failure is
 * not transient (only network errors, timeouts, 429, 502, 503 and 504 are), retries are
 * used up, or the server's `Retry-After` asks for longer than `maxDelay`.
 *
 * @example
 * ```ts
 * const wait = retryDelay(error, 'GET', 0, DEFAULT_RETRY) // 250, or Retry-After
 * ```
 */
export function retryDelay(error: BerthError, method: string, attempt: number, policy: RetryPolicy): number | undefined {
  if (attempt >= policy.retries || !IDEMPOTENT_METHODS.has(method.toUpperCase())) return undefined
  const transient = error.code === 'NETWORK_ERROR' || error.code === 'TIMEOUT' || RETRY_STATUSES.has(error.status)
  if (!transient) return undefined
  const asked = retryAfterMs(error.headers?.get('retry-after'))
  if (asked !== undefined) return asked <= policy.maxDelay ? asked : undefined
  return Math.min(policy.delay * 2 ** attempt, policy.maxDelay)
}
