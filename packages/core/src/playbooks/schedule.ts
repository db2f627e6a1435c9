/** A playbook's schedule read with croner: validation, next run times and the slot due now. */
import { Cron } from 'croner'
import { validationError, type PlaybookSchedule, type PlaybookScheduleInput } from '@berth/contract'

/** How many run times a playbook's view shows. */
export const NEXT_RUNS_SHOWN = 5

/** The pattern in `zone`, never started (croner only computes times here). */
function cronOf(schedule: Pick<PlaybookSchedule, 'cron' | 'timezone'>): Cron {
  // 5 fields, or 6 with seconds first; croner's 7th (year) field is not part of the contract.
  return new Cron(schedule.cron, { timezone: schedule.timezone, paused: true, mode: '5-or-6-parts' })
}

/**
 * The stored schedule of a body's `schedule`: 400 naming `schedule.cron` when croner cannot
 * read the expression (the zone was checked by the contract); the time zone defaults to UTC
 * and the missed-run policy to `skip`.
 *
 * @example
 * ```ts
 * parseSchedule({ cron: '0 7 * * 1-5', timezone: 'Europe/Berlin' })
 * // { cron: '0 7 * * 1-5', timezone: 'Europe/Berlin', missed: 'skip' }
 * parseSchedule({ cron: '61 * * * *' }) // throws VALIDATION_FAILED, path "schedule.cron"
 * ```
 */
export function parseSchedule(input: PlaybookScheduleInput): PlaybookSchedule {
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
