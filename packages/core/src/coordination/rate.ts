import type { RateDecision } from '../limits/rate-limit.js'
import type { RateSettings } from './port.js'

/**
 * Check a bucket's settings as core's `tokenBucket` does.
 *
 * @example
 * ```ts
 * checkRateSettings({ rpm: 60, burst: 10 }) // throws for burst < 1 or rpm <= 0
 * ```
 */
export function checkRateSettings({ rpm, burst }: RateSettings): void {
  if (!(burst >= 1) || !(rpm > 0)) throw new Error('rate limit needs burst >= 1 and rpm > 0')
}

/**
 * The decision for one take, from the tokens left after it: the same numbers (and
 * `RateLimit-*` / `Retry-After` values) as core's in-process `tokenBucket`, so every driver
 * answers alike.
 *
 * @example
 * ```ts
 * rateDecision(9, true, { rpm: 60, burst: 10 }) // { allowed: true, remaining: 9, resetSeconds: 1, ... }
 * ```
 */
export function rateDecision(tokens: number, allowed: boolean, { rpm, burst }: RateSettings): RateDecision {
  const perMs = rpm / 60_000
  return {
    allowed,
    limit: burst,
    remaining: Math.floor(tokens),
    resetSeconds: Math.ceil((burst - tokens) / perMs / 1000),
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - tokens) / perMs / 1000)),
    policy: `${burst};w=${Math.ceil(burst / perMs / 1000)};burst=${burst};rpm=${rpm}`,
  }
}
