/** Percentiles of a sample, in the sample's unit. */
export interface Summary {
  p50: number
  p90: number
  p99: number
  min: number
  max: number
  mean: number
  n: number
}

/**
 * p50 (the median, halfway between the two middle samples for an even count), p90 and
 * p99 (nearest rank), min, max and mean of `samples`; NaN fields for an empty sample.
 * With 20 samples, p99 is the maximum.
 *
 * @example
 * ```ts
 * summarize([3, 1, 2]) // { p50: 2, p90: 3, p99: 3, min: 1, max: 3, mean: 2, n: 3 }
 * ```
 */
export function summarize(samples: number[]): Summary {
  const s = samples.filter(Number.isFinite).sort((a, b) => a - b)
  const n = s.length
  if (!n) return { p50: NaN, p90: NaN, p99: NaN, min: NaN, max: NaN, mean: NaN, n: 0 }
  const rank = (q: number) => s[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!
  const p50 = n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2
  return { p50, p90: rank(0.9), p99: rank(0.99), min: s[0]!, max: s[n - 1]!, mean: s.reduce((a, b) => a + b, 0) / n, n }
}

/**
 * Wall-clock time in milliseconds with sub-millisecond resolution, comparable across
 * processes on one machine (unlike `performance.now()`, whose origin is per process).
 *
 * @example
 * ```ts
 * const t0 = wallNow(); await work(); console.log(wallNow() - t0)
 * ```
 */
export function wallNow(): number {
  return performance.timeOrigin + performance.now()
}
