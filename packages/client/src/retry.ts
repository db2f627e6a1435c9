import type { FetchContext, FetchOptions } from 'ofetch'
import { sleep } from './internal/sleep.js'
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
export function retryPolicy(
  option: RetryOptions | number | false | undefined,
  base: RetryPolicy = DEFAULT_RETRY,
): RetryPolicy {
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

/** The part of ofetch's options that carries the retry policy of one call. */
export type FetchRetryOptions = Pick<
  FetchOptions,
  'retry' | 'retryDelay' | 'retryStatusCodes' | 'onRequestError' | 'onResponseError'
>

/**
 * ofetch's own retry options for one call under `policy`: only idempotent methods retry,
 * only on transient failures (network errors, timeouts, 429, 502, 503 and 504), waiting
 * the doubling backoff or the server's `Retry-After`, and not at all when `Retry-After`
 * asks for longer than `maxDelay` or the caller aborted.
 *
 * @example
 * ```ts
 * await $fetch(url, { method: 'GET', ...fetchRetry('GET', DEFAULT_RETRY) })
 * ```
 */
export function fetchRetry(method: string, policy: RetryPolicy, signal?: AbortSignal): FetchRetryOptions {
  const retries = IDEMPOTENT_METHODS.has(method.toUpperCase()) ? policy.retries : 0
  const backoff = (context: FetchContext) =>
    Math.min(policy.delay * 2 ** (retries - Number(context.options.retry)), policy.maxDelay)
  // The hooks run before ofetch decides on a retry. They wait here rather than through
  // ofetch's `retryDelay`, whose timer an abort cannot cut short; `retry: false` stops it.
  const beforeRetry = async (context: FetchContext, wait: number | undefined) => {
    if (wait === undefined || !(Number(context.options.retry) > 0) || signal?.aborted) {
      context.options.retry = false
      return
    }
    // ofetch keeps the signal of a timed call for its retry, where that timer is gone (or
    // fired): without the caller's own signal, each attempt gets a fresh timeout instead.
    if (!signal) delete context.options.signal
    // An abort during the wait rejects the call with the signal's reason (ABORTED).
    await sleep(wait, signal)
  }
  return {
    retry: retries,
    // ofetch counts a failure without an answer (network error, timeout) as status 500; a
    // real 500 answer is not retried (onResponseError stops it).
    retryStatusCodes: [...RETRY_STATUSES, 500],
    retryDelay: 0,
    onRequestError: (context) => beforeRetry(context, backoff(context)),
    onResponseError: (context) => {
      if (!RETRY_STATUSES.has(context.response.status)) return beforeRetry(context, undefined)
      const asked = retryAfterMs(context.response.headers.get('retry-after'))
      return beforeRetry(context, asked === undefined ? backoff(context) : asked <= policy.maxDelay ? asked : undefined)
    },
  }
}
