/** limits/: the per-caller token bucket (and one over a shared coordination) per-profile concurrency slots and per-caller caps. */
export { tokenBucket, type RateLimiter, type RateDecision } from './rate-limit.js'
export { ConcurrencySlots } from './concurrency.js'
export { CallerCaps, type CallerCapSettings, type CallerCapOverride } from './caller-caps.js'
