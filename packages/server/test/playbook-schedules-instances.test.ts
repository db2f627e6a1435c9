/**
 * Scheduled playbooks on two instances sharing one Redis (coordination) and one Postgres
 * (records), on one manual clock: every slot is claimed by exactly one instance however
 * often both tick, and while Redis is away the ticks claim nothing (and do not throw) until
 * it is back, empty.
 */
import { manualClock } from '@berth/core'
import { postgresStore } from '@berth/server'
import { startPostgres, startRedis, type LocalPostgres, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { agentUser, startCluster, type Cluster, type Instance } from './cluster.helpers.js'

const MINUTE = 60_000
const T0 = Date.parse('2026-03-02T08:00:30Z')

let pg: LocalPostgres
let redis: LocalRedis
let cluster: Cluster | undefined
const clock = manualClock(T0)
beforeAll(async () => {
  pg = await startPostgres()
  redis = await startRedis()
  cluster = await startCluster('redis', {
    count: 2,
    redis,
    store: () => postgresStore(pg.url),
    coordination: { commandTimeoutMs: 500 },
    // No timer: the test ticks both instances itself, at the same moments.
    berth: { clock, playbookSchedule: { timers: { setInterval: () => 0, clearInterval: () => {} } } },
  })
}, 120_000)
afterAll(async () => {
  await cluster?.close()
  await redis?.stop()
  await pg?.stop()
})

const tickAll = (instances: Instance[]) =>
  Promise.all(
    instances.flatMap((i) => [i.berth.services.playbookScheduler.tick(), i.berth.services.playbookScheduler.tick()]),
  )

describe('a schedule on two instances sharing Redis', () => {
  it('runs exactly once per slot over three slots, and claims nothing while Redis is away', async () => {
    const c = cluster!
    const [a, b] = c.instances as [Instance, Instance]
    const user = await agentUser(c)
    const api = a.client(user.token)
    const pb = await api.playbooks.create({
      body: {
        profile_id: user.profileId,
        name: 'Every minute',
        prompt: 'Tick.',
        trigger_type: 'schedule',
        schedule: { cron: '* * * * *', timezone: 'UTC' },
      },
    })
    const slots = [1, 2, 3].map((n) => T0 - 30_000 + n * MINUTE)
    for (const slot of slots) {
      clock.set(slot + 2_000)
      // Each instance ticks twice at once: four tries at every slot.
      await tickAll([a, b])
    }
    const runs = async () =>
      (await b.client(user.token).playbooks.runs({ params: { id: pb.id }, query: { limit: 100 } })).runs
    expect((await runs()).map((r) => r.scheduled_for).sort()).toEqual(slots.map((s) => new Date(s).toISOString()))

    await redis.kill()
    for (const inst of [a, b]) await vi.waitFor(() => expect(inst.coordination.state().reachable).toBe(false), 10_000)
    const fourth = slots[2]! + MINUTE
    clock.set(fourth + 2_000)
    await tickAll([a, b])
    expect(await runs()).toHaveLength(3)

    await redis.start()
    for (const inst of [a, b])
      await vi.waitFor(() => expect(inst.coordination.state()).toMatchObject({ reachable: true, leased: true }), 20_000)
    await tickAll([a, b])
    await tickAll([a, b])
    const after = await runs()
    expect(after).toHaveLength(4)
    expect(after[0]).toMatchObject({ trigger: 'schedule', scheduled_for: new Date(fourth).toISOString() })
  }, 120_000)
})
