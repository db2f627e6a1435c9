/**
 * A schedule's shortest interval, read from croner's parse of its seconds, minutes and hours:
 * the gaps inside a minute, the wraps into the next minute, hour and day.
 */
import { describe, expect, it } from 'vitest'
import { parseSchedule, shortestIntervalS } from '../src/playbooks/schedule.js'

describe('shortestIntervalS', () => {
  it.each([
    ['* * * * * *', 1],
    ['*/5 * * * * *', 5],
    ['15,45 * 1 * * *', 30],
    // :59 of one minute to :00 of the next, :59 of one hour to :00 of the next.
    ['0,59 * * * * *', 1],
    ['0,59 * * * *', 60],
    ['30 0,59 * * * *', 60],
    ['* * * * *', 60],
    ['0,30 9-17 * * *', 1800],
    ['@hourly', 3600],
    ['0 */2 * * *', 7200],
    // 23:00 to the next day's 01:00.
    ['0 1,23 * * *', 7200],
    ['0 7 * * 1-5', 86_400],
    ['@daily', 86_400],
  ])('%s: %i s', (cron, seconds) => {
    expect(shortestIntervalS(cron)).toBe(seconds)
  })

  it("refuses, naming schedule.cron, a schedule nearer than the server's floor and takes one that is not", () => {
    expect(() => parseSchedule({ cron: '*/10 * * * * *' }, 60)).toThrow(/10 s apart.*at least 60 s/)
    expect(parseSchedule({ cron: '*/10 * * * * *' }, 10)).toMatchObject({ cron: '*/10 * * * * *' })
    expect(parseSchedule({ cron: '* * * * * *' }, 0)).toMatchObject({ timezone: 'UTC', missed: 'skip' })
  })
})
