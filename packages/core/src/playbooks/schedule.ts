/** A playbook's schedule read with croner: validation, next run times and the slot due now. */
import { Cron, CronPattern } from 'croner'
import { validationError, type PlaybookSchedule, type PlaybookScheduleInput } from '@berth/contract'

/** How many run times a playbook's view shows. */
export const NEXT_RUNS_SHOWN = 5

/** The shortest interval between two runs a server may be configured to allow, at most (s): one day. */
export const MAX_SCHEDULE_MIN_INTERVAL_S = 86_400

// 5 fields, or 6 with seconds first; croner's 7th (year) field is not part of the contract.
const MODE = '5-or-6-parts'

/** The pattern in `zone`, never started (croner only computes times here). */
function cronOf(schedule: Pick<PlaybookSchedule, 'cron' | 'timezone'>): Cron {
  return new Cron(schedule.cron, { timezone: schedule.timezone, paused: true, mode: MODE })
}

/** The indexes set in one of croner's fields (an array of 0/1 flags), ascending. */
const setIn = (flags: readonly number[]) => flags.flatMap((on, i) => (on ? [i] : []))

/** The smallest difference between neighbours of an ascending list (Infinity for fewer than two). */
function closest(xs: readonly number[]): number {
  let min = Number.POSITIVE_INFINITY
  for (let i = 1; i < xs.length; i++) min = Math.min(min, xs[i]! - xs[i - 1]!)
  return min
}

/**
 * The seconds between the two closest runs of a cron expression, from croner's reading of
 * its seconds, minutes and hours: every matching day runs at the same times of day, so the
 * closest runs are neighbours among them, or the day's last and the next day's first (taken
 * to match, which caps the answer at a day). Daylight-saving changes are not counted.
 *
 * @example
 * ```ts
 * shortestIntervalS('* * * * * *') // 1
 * shortestIntervalS('0,59 * * * *') // 60 (:59 to the next hour's :00)
 * shortestIntervalS('0 7 * * 1-5') // 86400
 * ```
 */
export function shortestIntervalS(cron: string): number {
  const p = new CronPattern(cron, undefined, { mode: MODE })
  const [s, m, h] = [setIn(p.second), setIn(p.minute), setIn(p.hour)]
  const span = (xs: number[]) => xs[xs.length - 1]! - xs[0]!
  // From the last run of one minute (hour, day) to the first of the next that runs.
  const minuteWrap = 60 * closest(m) - span(s)
  const hourWrap = 3600 * closest(h) - (60 * span(m) + span(s))
  const dayWrap = 86_400 - (3600 * span(h) + 60 * span(m) + span(s))
  return Math.min(closest(s), minuteWrap, hourWrap, dayWrap)
}

/**
 * The stored schedule of a body's `schedule`: 400 naming `schedule.cron` when croner cannot
 * read the expression (the zone was checked by the contract) or when two of its runs come
 * closer than `minIntervalS` seconds (the server's floor); the time zone defaults to UTC and
 * the missed-run policy to `skip`.
 *
 * @example
 * ```ts
 * parseSchedule({ cron: '0 7 * * 1-5', timezone: 'Europe/Berlin' }, 60)
 * // { cron: '0 7 * * 1-5', timezone: 'Europe/Berlin', missed: 'skip' }
 * parseSchedule({ cron: '61 * * * *' }, 60) // throws VALIDATION_FAILED, path "schedule.cron"
 * parseSchedule({ cron: '*\/10 * * * * *' }, 60) // throws: runs 10 s apart
 * ```
 */
export function parseSchedule(input: PlaybookScheduleInput, minIntervalS: number): PlaybookSchedule {
  const schedule = { cron: input.cron.trim(), timezone: input.timezone ?? 'UTC', missed: input.missed ?? 'skip' }
  let next: Date | null
  try {
    next = cronOf(schedule).nextRun()
  } catch (err) {
    const message = (err as Error).message.replace(/^CronPattern: /, '').slice(0, 200)
    throw validationError([{ location: 'body', path: 'schedule.cron', message }])
  }
  // A valid pattern that matches no date (`0 0 30 2 *`) would be a playbook that never runs.
  if (!next) throw validationError([{ location: 'body', path: 'schedule.cron', message: 'never matches a time' }])
  const interval = shortestIntervalS(schedule.cron)
  if (interval < minIntervalS) {
    throw validationError([
      {
        location: 'body',
        path: 'schedule.cron',
        message: `runs ${interval} s apart at its closest; this server allows at least ${minIntervalS} s between runs`,
      },
    ])
  }
  return schedule
}

/**
 * The next `count` run times after `after` (epoch ms), as ISO strings; fewer when the
 * pattern stops matching (e.g. `0 0 30 2 *`).
 *
 * @example
 * ```ts
 * nextRuns({ cron: '0 * * * *', timezone: 'UTC' }, Date.parse('2026-01-01T10:30:00Z'), 2)
 * // ['2026-01-01T11:00:00.000Z', '2026-01-01T12:00:00.000Z']
 * ```
 */
export function nextRuns(
  schedule: Pick<PlaybookSchedule, 'cron' | 'timezone'>,
  after: number,
  count: number,
): string[] {
  return cronOf(schedule)
    .nextRuns(count, new Date(after))
    .map((d) => d.toISOString())
}

/**
 * The latest slot in `(since, now]` (epoch ms), and the slot after it; `null` when none is
 * due. Older slots in the interval are not returned: a schedule catches up at most once.
 *
 * @example
 * ```ts
 * dueSlot({ cron: '* * * * *', timezone: 'UTC' }, Date.parse('2026-01-01T10:00:30Z'), Date.parse('2026-01-01T10:02:10Z'))
 * // { at: Date.parse('2026-01-01T10:02:00Z'), next: Date.parse('2026-01-01T10:03:00Z') }
 * ```
 */
export function dueSlot(
  schedule: Pick<PlaybookSchedule, 'cron' | 'timezone'>,
  since: number,
  now: number,
): { at: number; next: number | null } | null {
  const cron = cronOf(schedule)
  // previousRuns counts a run in the reference's own second: one ms past `now` includes `now`.
  const [latest] = cron.previousRuns(1, new Date(now + 1))
  if (!latest || latest.getTime() <= since) return null
  const at = latest.getTime()
  return { at, next: cron.nextRun(new Date(at))?.getTime() ?? null }
}
