/**
 * The audit log of several instances on one store and coordination backend (a `memoryHub`,
 * and a real redis-server with the redis store): failed authentication from one address in
 * one minute is one entry whose count adds up every instance's, and every instance lists
 * what the others recorded.
 */
import { manualClock } from '@berth/core'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, startCluster, type Backend, type Cluster } from './cluster.helpers.js'

let redis: LocalRedis
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(async () => {
  await redis?.stop()
})

describe.each(['memory', 'redis'] satisfies Backend[])(
  'audit log over two instances sharing a %s backend',
  (backend) => {
    let c: Cluster
    // One minute for the whole test, whatever the wall clock does.
    const clock = manualClock(Date.parse('2026-03-01T10:00:05Z'))
    beforeAll(async () => {
      c = await startCluster(backend, { count: 2, redis, berth: { clock } })
    })
    afterAll(async () => c?.close())

    it('failed authentication from one address in one minute is one entry counting every instance', async () => {
      const [one, two] = c.instances as [Cluster['instances'][0], Cluster['instances'][0]]
      const bad = (i: typeof one, n: number) =>
        Array.from({ length: n }, () => i.request('/v1/profiles', { token: 'berth_sk_not-a-key' }))
      const answers = await Promise.all([...bad(one, 4), ...bad(two, 3)])
      expect(answers.map((r) => r.status)).toEqual(Array(7).fill(401))
      // Both at once: one takes the entry's lock, the other keeps its count for its next flush.
      await Promise.all([one.berth.services.audit.flush(), two.berth.services.audit.flush()])
      await one.berth.services.audit.flush()
      await two.berth.services.audit.flush()
      for (const instance of [one, two]) {
        const { entries } = await instance.client(ADMIN_TOKEN).admin.audit.list({ query: { action: 'auth.failed' } })
        expect(entries).toHaveLength(1)
        expect(entries[0]).toMatchObject({ at: '2026-03-01T10:00:00.000Z', details: { count: 7 }, outcome: 'failure' })
      }
    })

    it('an action on one instance is listed by the other, for the admin and for its owner', async () => {
      const user = await c.user('Ada')
      const [one, two] = c.instances as [Cluster['instances'][0], Cluster['instances'][0]]
      const secret = await one.client(user.token).secrets.create({ body: { name: 'SHARED', value: 'not-in-the-log' } })
      const own = await two.client(user.token).audit.list({ query: { target: secret.id } })
      expect(own.entries.map((e) => [e.action, e.actor.id])).toEqual([['secret.created', user.id]])
      const all = await two.client(ADMIN_TOKEN).admin.audit.list({ query: { actor: user.id } })
      expect(all.entries.map((e) => e.action)).toEqual(['secret.created'])
    })
  },
)
