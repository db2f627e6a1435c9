/** limits/: the per-caller token bucket (and one over a shared coordination) and per-profile concurrency slots. */
export { tokenBucket, type RateLimiter, type RateDecision } from './rate-limit.js'
export { ConcurrencySlots } from './concurrency.js'
