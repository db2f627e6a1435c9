/**
 * Scheduled playbooks on one instance, driven by a manual clock and `tick()`: the schedule's
 * validation (400 naming the field, nothing written), its view (next runs, last slot), one
 * run per slot across a restart on the same store, the missed-run policies at start, and
 * enable/disable. Without an engine each run is recorded as failed (502), which is what a
 * refused scheduled run must be: recorded, not lost.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { manualClock, type RateLimiter } from '@berth/core'
import type { BerthOptions } from '@berth/server'
import type { BerthClient } from '@berth/client'
import { clientFor, ENDED, failure, startServer, type TestServer } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

const T0 = Date.parse('2026-03-02T08:00:30Z')
const EVERY_MINUTE = { cron: '* * * * *', timezone: 'UTC' }

let open: TestServer[] = []
const dirs: string[] = []
afterEach(async () => {
  for (const s of open) await s.close()
  open = []
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

/** A data dir (its SQLite store and key) that outlives the servers started on it. */
function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-schedules-'))
  dirs.push(dir)
  return dir
}

/** A server on `dir` whose clock is `clock`; its scheduler ticks only when told. */
async function server(dir: string, clock: ReturnType<typeof manualClock>, extra: Partial<BerthOptions> = {}) {
  const s = await startServer({
    ...extra,
    dataDir: dir,
    storage: createStorage({ driver: fsDriver({ base: join(dir, 'store') }) }),
    clock,
    // No timer: the test calls tick(), so the slots are the clock's and nothing else's.
    playbookSchedule: { ...extra.playbookSchedule, timers: { setInterval: () => 0, clearInterval: () => {} } },
  })
  await s.berth.ready
  open.push(s)
  return s
}

async function userWithProfile(s: TestServer, name = 'Ada') {
  const { token } = await s.user(name)
  const api = clientFor(s, token)
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const profile = await api.profiles.create({ body: { name: 'Agent', slug: 'agent', api_key_id: key.id } })
  return { api, token, profileId: profile.id }
}

const runsOf = async (api: BerthClient, id: string) =>
  (await api.playbooks.runs({ params: { id }, query: { limit: 100 } })).runs

describe('scheduled playbooks', () => {
  it('refuse a bad cron, a bad time zone and a misplaced schedule with 400 naming the field, writing nothing', async () => {
    const clock = manualClock(T0)
    const s = await server(dataDir(), clock)
    const { api, profileId } = await userWithProfile(s)
    const base = { profile_id: profileId, name: 'Triage', prompt: 'Triage the new issues.' }
    const cases = [
      [{ trigger_type: 'schedule', schedule: { cron: '61 * * * *', timezone: 'UTC' } }, 'schedule.cron'],
      [{ trigger_type: 'schedule', schedule: { cron: 'every day', timezone: 'UTC' } }, 'schedule.cron'],
      [{ trigger_type: 'schedule', schedule: { cron: '0 0 30 2 *', timezone: 'UTC' } }, 'schedule.cron'],
      [{ trigger_type: 'schedule', schedule: { cron: '0 7 * * *', timezone: 'Mars/Olympus' } }, 'schedule.timezone'],
      [{ trigger_type: 'schedule' }, 'schedule'],
      [{ trigger_type: 'manual', schedule: EVERY_MINUTE }, 'schedule'],
      [{ schedule: EVERY_MINUTE }, 'schedule'],
    ] as const
    for (const [extra, path] of cases) {
      const err = await failure(api.playbooks.create({ body: { ...base, ...extra } as never }))
      expect(err.status, path).toBe(400)
      expect(err.code).toBe('VALIDATION_FAILED')
      expect(pathOf(err), JSON.stringify(extra)).toBe(path)
    }
    expect((await api.profiles.playbooks({ params: { id: profileId }, query: {} })).total).toBe(0)

    const pb = await api.playbooks.create({ body: { ...base, trigger_type: 'manual' } })
    const patched = await failure(
      api.playbooks.update({
        params: { id: pb.id },
        body: { trigger_type: 'schedule', schedule: { cron: '0 25 * * *' } },
      }),
    )
    expect(pathOf(patched)).toBe('schedule.cron')
    const missing = await failure(api.playbooks.update({ params: { id: pb.id }, body: { trigger_type: 'schedule' } }))
    expect(pathOf(missing)).toBe('schedule')
    expect(await api.playbooks.get({ params: { id: pb.id } })).toMatchObject({ trigger_type: 'manual', schedule: null })
  })

  it("refuse a cron whose closest runs are nearer than the server's least interval, 400 naming schedule.cron", async () => {
    const s = await server(dataDir(), manualClock(T0))
    const { api, profileId } = await userWithProfile(s)
    const base = { profile_id: profileId, name: 'Often', prompt: 'Report.', trigger_type: 'schedule' } as const
    // A minute by default: seconds fields, and seconds that wrap into the next minute, are too close.
    for (const cron of ['* * * * * *', '*/30 * * * * *', '0,59 * * * * *', '15,45 * 1 * * *']) {
      const err = await failure(api.playbooks.create({ body: { ...base, schedule: { cron } } }))
      expect([err.status, err.code, pathOf(err)], cron).toEqual([400, 'VALIDATION_FAILED', 'schedule.cron'])
      expect(err.message, cron).toContain('at least 60 s')
    }
    expect((await api.profiles.playbooks({ params: { id: profileId }, query: {} })).total).toBe(0)
    for (const cron of ['* * * * *', '0 * * * * *', '0,59 * * * *', '0 7 * * 1-5'])
      expect((await api.playbooks.create({ body: { ...base, schedule: { cron } } })).schedule?.cron).toBe(cron)
    const manual = await api.playbooks.create({ body: { ...base, trigger_type: 'manual' } })
    const err = await failure(
      api.playbooks.update({
        params: { id: manual.id },
        body: { trigger_type: 'schedule', schedule: { cron: '* * * * * *' } },
      }),
    )
    expect([err.status, pathOf(err)]).toEqual([400, 'schedule.cron'])
    expect((await api.playbooks.get({ params: { id: manual.id } })).trigger_type).toBe('manual')

    // The operator's setting moves the floor.
    const hourly = await server(dataDir(), manualClock(T0), { playbookSchedule: { minIntervalS: 3600 } })
    const h = await userWithProfile(hourly)
    const hbase = { ...base, profile_id: h.profileId }
    const tooOften = await failure(h.api.playbooks.create({ body: { ...hbase, schedule: { cron: '*/30 * * * *' } } }))
    expect([tooOften.status, pathOf(tooOften)]).toEqual([400, 'schedule.cron'])
    expect(tooOften.message).toContain('runs 1800 s apart')
    expect((await h.api.playbooks.create({ body: { ...hbase, schedule: { cron: '0 * * * *' } } })).enabled).toBe(true)
  })

  it('cap the active schedules of one caller: one more is 409 CONFLICT, disabled ones and other callers do not count', async () => {
    const s = await server(dataDir(), manualClock(T0), { playbookSchedule: { maxPerCaller: 2 } })
    const { api, profileId } = await userWithProfile(s)
    const body = (name: string, extra: object = {}) => ({
      profile_id: profileId,
      name,
      prompt: 'Report.',
      trigger_type: 'schedule' as const,
      schedule: { cron: '0 * * * *' },
      ...extra,
    })
    const [a, b] = [await api.playbooks.create({ body: body('a') }), await api.playbooks.create({ body: body('b') })]
    const third = await failure(api.playbooks.create({ body: body('c') }))
    expect([third.status, third.code, third.details]).toEqual([409, 'CONFLICT', { limit: 2, active: 2 }])
    // Paused ones and other triggers are not active schedules; making one active is held to the cap.
    const paused = await api.playbooks.create({ body: body('paused', { enabled: false }) })
    const manual = await api.playbooks.create({ body: body('manual', { trigger_type: 'manual', schedule: undefined }) })
    for (const change of [
      { id: paused.id, body: { enabled: true } },
      { id: manual.id, body: { trigger_type: 'schedule' as const, schedule: { cron: '0 8 * * *' } } },
    ]) {
      const err = await failure(api.playbooks.update({ params: { id: change.id }, body: change.body }))
      expect([err.status, err.code]).toEqual([409, 'CONFLICT'])
    }
    expect((await api.playbooks.get({ params: { id: paused.id } })).enabled).toBe(false)
    expect((await api.playbooks.get({ params: { id: manual.id } })).trigger_type).toBe('manual')
    // An active schedule may still change; another caller has a cap of its own.
    expect(
      (await api.playbooks.update({ params: { id: a.id }, body: { schedule: { cron: '0 9 * * *' } } })).enabled,
    ).toBe(true)
    const other = await userWithProfile(s, 'Grace')
    expect((await other.api.playbooks.create({ body: { ...body('a'), profile_id: other.profileId } })).enabled).toBe(
      true,
    )
    // Room again once one is paused.
    await api.playbooks.update({ params: { id: b.id }, body: { enabled: false } })
    expect((await api.playbooks.update({ params: { id: paused.id }, body: { enabled: true } })).enabled).toBe(true)
  })

  it('shows its next runs in its zone, clears the schedule when the trigger changes, and is 404 to another caller', async () => {
    const clock = manualClock(Date.parse('2026-03-27T12:00:00Z'))
    const s = await server(dataDir(), clock)
    const { api, profileId } = await userWithProfile(s)
    const pb = await api.playbooks.create({
      body: {
        profile_id: profileId,
        name: 'Morning',
        prompt: 'Good morning.',
        trigger_type: 'schedule',
        schedule: { cron: '0 7 * * 1-5', timezone: 'Europe/Berlin' },
      },
    })
    expect(pb).toMatchObject({
      enabled: true,
      schedule: { cron: '0 7 * * 1-5', timezone: 'Europe/Berlin', missed: 'skip' },
      last_slot: null,
    })
    // Friday 27 March, then across the switch to summer time (UTC+1 to UTC+2) on the 29th.
    expect(pb.next_runs.slice(0, 3)).toEqual([
      '2026-03-30T05:00:00.000Z',
      '2026-03-31T05:00:00.000Z',
      '2026-04-01T05:00:00.000Z',
    ])
    expect(pb.next_runs).toHaveLength(5)

    const other = clientFor(s, (await s.user('Mallory')).token)
    expect((await failure(other.playbooks.get({ params: { id: pb.id } }))).status).toBe(404)
    const foreign = await failure(other.playbooks.update({ params: { id: pb.id }, body: { enabled: false } }))
    expect(foreign.status).toBe(404)
    expect((await api.playbooks.get({ params: { id: pb.id } })).enabled).toBe(true)

    const disabled = await api.playbooks.update({ params: { id: pb.id }, body: { enabled: false } })
    expect(disabled).toMatchObject({ enabled: false, next_runs: [] })
    const manual = await api.playbooks.update({ params: { id: pb.id }, body: { trigger_type: 'manual' } })
    expect(manual).toMatchObject({ trigger_type: 'manual', schedule: null, next_runs: [] })
  })

  it('runs once per slot, and a restarted instance on the same store does not run a slot again', async () => {
    const dir = dataDir()
    const clock = manualClock(T0)
    const first = await server(dir, clock)
    const { api, token, profileId } = await userWithProfile(first)
    const pb = await api.playbooks.create({
      body: { profile_id: profileId, name: 'Tick', prompt: 'Tick.', trigger_type: 'schedule', schedule: EVERY_MINUTE },
    })
    await tick(first)
    expect(await runsOf(api, pb.id)).toHaveLength(0)
    clock.set(Date.parse('2026-03-02T08:01:05Z'))
    await Promise.all([tick(first), tick(first)])
    await tick(first)
    const runs = await runsOf(api, pb.id)
    expect(runs.map((r) => [r.trigger, r.scheduled_for])).toEqual([['schedule', '2026-03-02T08:01:00.000Z']])
    // Without an engine the task is refused: the run is there, failed, with the reason.
    expect(runs[0]).toMatchObject({ status: 'failed', error: { code: expect.any(String) } })
    expect(await api.playbooks.get({ params: { id: pb.id } })).toMatchObject({
      last_slot: { at: '2026-03-02T08:01:00.000Z', run_id: runs[0]!.id },
      next_runs: expect.arrayContaining(['2026-03-02T08:02:00.000Z']),
    })

    await first.close()
    open = []
    // Same store, same minute: the slot is taken care of, whatever this process's memory holds.
    const second = await server(dir, clock)
    const again = clientFor(second, token)
    await tick(second)
    await tick(second)
    expect(await runsOf(again, pb.id)).toHaveLength(1)
    clock.set(Date.parse('2026-03-02T08:02:01Z'))
    await tick(second)
    expect((await runsOf(again, pb.id)).map((r) => r.scheduled_for)).toEqual([
      '2026-03-02T08:02:00.000Z',
      '2026-03-02T08:01:00.000Z',
    ])
  })

  it('at start, runs one slot missed while no instance ran with run_once, and none with skip', async () => {
    const dir = dataDir()
    const clock = manualClock(T0)
    const first = await server(dir, clock)
    const { api, token, profileId } = await userWithProfile(first)
    const make = (name: string, missed: 'run_once' | 'skip') =>
      api.playbooks.create({
        body: {
          profile_id: profileId,
          name,
          prompt: name,
          trigger_type: 'schedule',
          schedule: { cron: '*/5 * * * *', timezone: 'UTC', missed },
        },
      })
    const once = await make('Catch up', 'run_once')
    const skip = await make('Skip', 'skip')
    await first.close()
    open = []
    // Down from 08:00:30 to 08:07:30: the 08:05 slot passed with no instance up, 2.5 minutes ago.
    clock.set(Date.parse('2026-03-02T08:07:30Z'))
    const second = await server(dir, clock)
    const again = clientFor(second, token)
    // ready started the scheduler, which ticks at once; one more tick changes nothing.
    await second.berth.services.playbookScheduler.tick()
    await tick(second)
    expect((await runsOf(again, once.id)).map((r) => r.scheduled_for)).toEqual(['2026-03-02T08:05:00.000Z'])
    expect(await runsOf(again, skip.id)).toEqual([])
    expect(await again.playbooks.get({ params: { id: skip.id } })).toMatchObject({
      last_slot: { at: '2026-03-02T08:05:00.000Z', run_id: null },
    })
    // From then on both run on time.
    clock.set(Date.parse('2026-03-02T08:10:20Z'))
    await tick(second)
    expect(await runsOf(again, once.id)).toHaveLength(2)
    expect((await runsOf(again, skip.id)).map((r) => r.scheduled_for)).toEqual(['2026-03-02T08:10:00.000Z'])
  })

  it("spends the owner's rate limit: a slot that finds it spent is a failed run with RATE_LIMITED, not a lost one", async () => {
    const clock = manualClock(T0)
    let spent = false
    const limiter: RateLimiter = {
      take: () =>
        spent
          ? { allowed: false, limit: 1, remaining: 0, resetSeconds: 60, retryAfterSeconds: 60 }
          : { allowed: true, limit: 1000, remaining: 999, resetSeconds: 0, retryAfterSeconds: 0 },
    }
    const s = await server(dataDir(), clock, { rateLimit: limiter })
    const { api, profileId } = await userWithProfile(s)
    const pb = await api.playbooks.create({
      body: { profile_id: profileId, name: 'Busy', prompt: 'x', trigger_type: 'schedule', schedule: EVERY_MINUTE },
    })
    clock.set(Date.parse('2026-03-02T08:01:05Z'))
    spent = true
    await tick(s)
    spent = false
    expect(await runsOf(api, pb.id)).toMatchObject([
      { trigger: 'schedule', status: 'failed', error: { code: 'RATE_LIMITED' }, task_id: null },
    ])
  })

  it('a disabled schedule starts nothing, and enabled again it counts from then, not from before', async () => {
    const clock = manualClock(T0)
    const s = await server(dataDir(), clock)
    const { api, profileId } = await userWithProfile(s)
    const pb = await api.playbooks.create({
      body: {
        profile_id: profileId,
        name: 'Paused',
        prompt: 'x',
        trigger_type: 'schedule',
        schedule: { ...EVERY_MINUTE, missed: 'run_once' },
        enabled: false,
      },
    })
    clock.set(Date.parse('2026-03-02T08:03:10Z'))
    await tick(s)
    expect(await runsOf(api, pb.id)).toEqual([])
    await api.playbooks.update({ params: { id: pb.id }, body: { enabled: true } })
    clock.set(Date.parse('2026-03-02T08:05:30Z'))
    await tick(s)
    // 08:04 and 08:05 passed since it was enabled: the latest runs, once.
    expect((await runsOf(api, pb.id)).map((r) => r.scheduled_for)).toEqual(['2026-03-02T08:05:00.000Z'])
  })
})

describe('a scheduled playbook on podman', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer('podman')
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it('runs a slot as an ordinary run: a task of the profile that completes, in the run history', async () => {
    const pb = await t.api.playbooks.create({
      body: {
        profile_id: t.profileId,
        name: 'Every minute',
        prompt: 'Report. [[berth:text Reported.]]',
        trigger_type: 'schedule',
        schedule: EVERY_MINUTE,
      },
    })
    // The next slot on the test's clock, then pause it so no later slot runs.
    const slot = Date.parse(pb.next_runs[0]!)
    t.s.clock.set(slot + 200)
    await tick(t.s)
    await t.api.playbooks.update({ params: { id: pb.id }, body: { enabled: false } })
    const run = await vi.waitFor(async () => {
      const [r] = await runsOf(t.api, pb.id)
      expect(ENDED).toContain(r?.status)
      return r!
    }, 90_000)
    expect(run).toMatchObject({ trigger: 'schedule', status: 'completed', scheduled_for: new Date(slot).toISOString() })
    const task = await t.api.tasks.get({ params: { id: run.task_id! } })
    expect(task.result!.text).toContain('Reported.')
  })

  it('does not answer its webhook while disabled', async () => {
    const pb = await t.api.playbooks.create({
      body: { profile_id: t.profileId, name: 'Hook', prompt: 'x', trigger_type: 'webhook', enabled: false },
    })
    const fire = () => t.s.request(`/api/playbooks/${pb.id}/webhook/${pb.webhook_secret}`, { method: 'POST' })
    expect((await fire()).status).toBe(404)
    await t.api.playbooks.update({ params: { id: pb.id }, body: { enabled: true } })
    expect((await fire()).status).toBe(202)
  })
})

/** The field the first issue of a 400 names. */
const pathOf = (err: { details?: Record<string, unknown> | undefined }) =>
  (err.details?.issues as { path: string }[] | undefined)?.[0]?.path

const tick = (s: TestServer) => s.berth.services.playbookScheduler.tick()
