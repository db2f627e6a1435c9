import type { Clock } from '../ports/clock.js'

/** The outcome of taking one token. */
export interface RateDecision {
  allowed: boolean
  /** Bucket capacity (`RateLimit-Limit`). */
  limit: number
  /** Whole tokens left after this request (`RateLimit-Remaining`). */
  remaining: number
  /** Seconds until the bucket is full again (`RateLimit-Reset`). */
  resetSeconds: number
  /** Seconds until the next token, when refused (`Retry-After`). */
  retryAfterSeconds: number
  /** The `RateLimit-Policy` value: the quota, its window, and any other terms. */
  policy?: string
}

/** What a limiter holds now: its settings and every key whose bucket is not full. */
export interface RateState {
  rpm: number
  burst: number
  /** Keys with requests taken and not yet refilled (a full bucket is forgotten). */
  keys: { key: string; remaining: number; reset_seconds: number }[]
}

/** Per-key request limiter. A networked implementation (Redis) can replace the in-memory one. */
export interface RateLimiter {
  take(key: string): RateDecision | Promise<RateDecision>
  /** Its state, for the operator's view (`GET /admin/limits`); optional for custom limiters. */
  state?(): RateState | Promise<RateState>
}

export interface TokenBucketOptions {
  /** Bucket capacity: requests admitted at once. */
  burst: number
  /** Refill rate in tokens per minute. */
  rpm: number
  clock: Clock
  /** Buckets kept before idle full ones are dropped (memory bound). */
  maxKeys?: number
}

/**
 * A token bucket per key: `burst` requests at once, refilled continuously at `rpm` per
 * minute. Each `take` is synchronous, so concurrent requests in one process are counted
 * exactly.
 *
 * @example
 * ```ts
 * const limiter = tokenBucket({ burst: 10, rpm: 60, clock: systemClock })
 * limiter.take('usr_1').allowed // true for the first 10 at once
 * ```
 */
export function tokenBucket(opts: TokenBucketOptions): {
  take(key: string): RateDecision
  state(): RateState
  size(): number
} {
  const { burst, rpm, clock } = opts
  if (!(burst >= 1) || !(rpm > 0)) throw new Error('rate limit needs burst >= 1 and rpm > 0')
  const perMs = rpm / 60_000
  const maxKeys = opts.maxKeys ?? 100_000
  const buckets = new Map<string, { tokens: number; at: number }>()
  // `burst` requests per the time the bucket takes to refill, plus the rate itself.
  const policy = `${burst};w=${Math.ceil(burst / perMs / 1000)};burst=${burst};rpm=${rpm}`

  const evict = (now: number) => {
    for (const [k, b] of buckets) if (b.tokens + (now - b.at) * perMs >= burst) buckets.delete(k)
  }

  return {
    state() {
      const now = clock.now()
      const keys: RateState['keys'] = []
      for (const [key, b] of buckets) {
        const tokens = Math.min(burst, b.tokens + Math.max(0, now - b.at) * perMs)
        if (tokens < burst)
          keys.push({ key, remaining: Math.floor(tokens), reset_seconds: Math.ceil((burst - tokens) / perMs / 1000) })
      }
      return { rpm, burst, keys }
    },
    /** Buckets held in memory now (the `maxKeys` bound). */
    size: () => buckets.size,
    take(key) {
      const now = clock.now()
      let b = buckets.get(key)
      if (!b) {
        if (buckets.size >= maxKeys) evict(now)
        b = { tokens: burst, at: now }
        buckets.set(key, b)
      } else {
        b.tokens = Math.min(burst, b.tokens + Math.max(0, now - b.at) * perMs)
        b.at = now
      }
      const allowed = b.tokens >= 1
      if (allowed) b.tokens -= 1
      return {
        allowed,
        limit: burst,
        remaining: Math.floor(b.tokens),
        resetSeconds: Math.ceil((burst - b.tokens) / perMs / 1000),
        retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - b.tokens) / perMs / 1000)),
        policy,
      }
    },
  }
}
