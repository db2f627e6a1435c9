import { CoordinationUnavailableError, type Coordination, type RateSettings } from '../coordination/port.js'
import { checkRateSettings } from '../coordination/rate.js'
import { systemClock, type Clock } from '../ports/clock.js'
import { tokenBucket, type RateLimiter, type RateState } from './rate-limit.js'

/**
 * A per-key limiter whose buckets live in the coordination backend, so every instance
 * counts against the same bucket (the same arithmetic and headers as `tokenBucket`). The
 * buckets are not listed: `state()` shows the settings and no keys (the backend keeps no
 * index of buckets; a bucket refills and disappears on its own). While the backend is out
 * of reach each instance counts in a bucket of its own (a caller may then get up to the
 * limit once per instance) rather than refusing every request.
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
  clock: Clock = systemClock,
): RateLimiter & { state(): RateState } {
  checkRateSettings(settings)
  const { rpm, burst } = settings
  const local = tokenBucket({ rpm, burst, clock })
  return {
    async take(key) {
      if (!coordination.state().reachable) return local.take(key)
      try {
        return await coordination.rates.take(`${scope}:${key}`, settings)
      } catch (err) {
        if (!(err instanceof CoordinationUnavailableError)) throw err
        return local.take(key)
      }
    },
    state: () => ({ rpm, burst, keys: [] }),
  }
}
