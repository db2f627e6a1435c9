/** Time source, injectable so limits and expiries are testable without sleeping. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number
}

/**
 * The wall clock.
 *
 * @example
 * ```ts
 * const t = systemClock.now()
 * ```
 */
export const systemClock: Clock = { now: () => Date.now() }

/**
 * A clock that only moves when told to; for tests.
 *
 * @example
 * ```ts
 * const clock = manualClock(0); clock.advance(1000); clock.now() // 1000
 * ```
 */
export function manualClock(start = 0): Clock & { advance(ms: number): void; set(ms: number): void } {
  let t = start
  return {
    now: () => t,
    advance: (ms) => {
      t += ms
    },
    set: (ms) => {
      t = ms
    },
  }
}

/** ISO-8601 timestamp of a clock's current time. */
export function isoNow(clock: Clock): string {
  return new Date(clock.now()).toISOString()
}
