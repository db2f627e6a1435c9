// The per-caller limiter: one process's token buckets, or the coordination backend's when instances share one.
import { coordinatedLimiter, tokenBucket, type Clock, type RateLimiter } from '@berth/core'
import type { BerthOptions } from '../berth-options.js'

/**
 * The limiter every request (a limiter of the caller's own, when given), failed-auth address and WebSocket message takes a token from:
 * with a `coordination` handed in (several instances), its shared buckets; else this
 * process's `tokenBucket`, whose per-key state `GET /admin/limits` lists.
 *
 * @example
 * ```ts
 * const limiter = rateLimiterFor({ rateLimit: { rpm: 60, burst: 10 } }, systemClock)
 * ```
 */
export function rateLimiterFor(options: BerthOptions, clock: Clock): RateLimiter {
  const given = options.rateLimit
  if (given && 'take' in given) return given
  const settings = { rpm: given?.rpm ?? 60, burst: given?.burst ?? 10 }
  return options.coordination
    ? coordinatedLimiter(options.coordination, settings, 'caller')
    : tokenBucket({ ...settings, clock })
}
