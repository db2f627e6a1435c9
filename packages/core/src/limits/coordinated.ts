import type { Coordination, RateSettings } from '../coordination/port.js'
import { checkRateSettings } from '../coordination/rate.js'
import type { RateLimiter, RateState } from './rate-limit.js'

/**
 * A per-key limiter whose buckets live in the coordination backend, so every instance
 * counts against the same bucket (the same arithmetic and headers as `tokenBucket`). The
 * buckets are not listed: `state()` shows the settings and no keys (the backend keeps no
 * index of buckets; a bucket refills and disappears on its own).
 *
 * @example
 * ```ts
 * const limiter = coordinatedLimiter(coordination, { rpm: 60, burst: 10 }, 'caller')
 * const d = await limiter.take('usr_1') // d.allowed, d.remaining, d.retryAfterSeconds
 * ```
 */
export function coordinatedLimiter(
  coordination: Coordination,
  settings: RateSettings,
  scope: string,
): RateLimiter & { state(): RateState } {
  checkRateSettings(settings)
  const { rpm, burst } = settings
  return {
    take: (key) => coordination.rates.take(`${scope}:${key}`, settings),
    state: () => ({ rpm, burst, keys: [] }),
  }
}
