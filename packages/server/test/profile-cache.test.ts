/**
 * `GET /v1/profiles/:id` answers from a per-instance cache (`profileCacheMs`): a change or a
 * delete is seen at once on the instance that made it, and on another instance sharing the
 * store (a `memoryHub`, and a real redis-server with the redis store) when the coordination's
 * message arrives, at the latest once the bound has passed; another caller's id stays a 404
 * on every instance.
 */
import { manualClock } from '@berth/core'
import { configFromEnv } from '@berth/server'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { startCluster, type Backend, type Cluster, type Instance } from './cluster.helpers.js'

const CACHE_MS = 1_000

let redis: LocalRedis
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(async () => {
  await redis?.stop()
})

describe.each(['memory', 'redis'] satisfies Backend[])(
  'the profile read cache over two instances sharing a %s backend',
  (backend) => {
    let c: Cluster
    let one: Instance
    let two: Instance
    // The cache's bound is passed by moving this clock, not by waiting.
    const clock = manualClock(Date.parse('2026-03-01T10:00:00Z'))
    beforeAll(async () => {
      c = await startCluster(backend, { count: 2, redis, berth: { clock, profileCacheMs: CACHE_MS } })
      ;[one, two] = c.instances as [Instance, Instance]
    })
    afterAll(async () => c?.close())

    async function profileOf(token: string) {
      const key = await one.client(token).apiKeys.create({ body: { name: 'stub', provider: 'stub' } })
      return one.client(token).profiles.create({ body: { name: 'Cached', slug: 'cached', api_key_id: key.id } })
    }
    const read = async (i: Instance, token: string, id: string) => {
      const res = await i.request(`/v1/profiles/${id}`, { token })
      return { status: res.status, body: (await res.json()) as { name?: string; code?: string } }
    }

    it('an update is seen at once where it was made, and on the other instance after the bound', async () => {
      const ada = await c.user('Ada')
      const p = await profileOf(ada.token)
      // Both instances have the profile in their cache now.
      expect((await read(one, ada.token, p.id)).body.name).toBe('Cached')
      expect((await read(two, ada.token, p.id)).body.name).toBe('Cached')

      await one.client(ada.token).profiles.update({ params: { id: p.id }, body: { name: 'Renamed' } })
      expect((await read(one, ada.token, p.id)).body.name).toBe('Renamed')
      // The other instance may answer from its cache until the bound has passed, never after.
      clock.advance(CACHE_MS + 1)
      expect((await read(two, ada.token, p.id)).body.name).toBe('Renamed')

      await two.client(ada.token).profiles.update({ params: { id: p.id }, body: { name: 'Again' } })
      expect((await read(two, ada.token, p.id)).body.name).toBe('Again')
      clock.advance(CACHE_MS + 1)
      expect((await read(one, ada.token, p.id)).body.name).toBe('Again')
    })

    it('the other instance is told of a change: it answers the new view before the bound has passed', async () => {
      const ada = await c.user('Ada')
      const p = await profileOf(ada.token)
      expect((await read(two, ada.token, p.id)).body.name).toBe('Cached')
      await one.client(ada.token).profiles.update({ params: { id: p.id }, body: { name: 'Told' } })
      // The clock stands still: only the coordination's message can drop two's entry.
      await vi.waitFor(async () => expect((await read(two, ada.token, p.id)).body.name).toBe('Told'), {
        timeout: 5_000,
        interval: 20,
      })
    })

    it('a delete is a 404 at once where it was made, and on the other instance after the bound', async () => {
      const ada = await c.user('Ada')
      const p = await profileOf(ada.token)
      expect((await read(one, ada.token, p.id)).status).toBe(200)
      expect((await read(two, ada.token, p.id)).status).toBe(200)
      await one.client(ada.token).profiles.delete({ params: { id: p.id } })
      expect(await read(one, ada.token, p.id)).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } })
      clock.advance(CACHE_MS + 1)
      expect(await read(two, ada.token, p.id)).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } })
    })

    it('another caller gets a 404 for a cached profile on every instance', async () => {
      const ada = await c.user('Ada')
      const eve = await c.user('Eve')
      const p = await profileOf(ada.token)
      for (const i of [one, two]) {
        expect((await read(i, ada.token, p.id)).status).toBe(200)
        expect(await read(i, eve.token, p.id)).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } })
      }
    })
  },
)

it('BERTH_PROFILE_CACHE_MS sets the bound (default 1000 ms); 0 turns the cache off and every read sees the store', async () => {
  expect(configFromEnv({}).profileCacheMs).toBe(1_000)
  expect(configFromEnv({ BERTH_PROFILE_CACHE_MS: '0' }).profileCacheMs).toBe(0)
  expect(() => configFromEnv({ BERTH_PROFILE_CACHE_MS: '-1' })).toThrow(/BERTH_PROFILE_CACHE_MS/)
  const c = await startCluster('memory', { count: 2, berth: { clock: manualClock(0), profileCacheMs: 0 } })
  try {
    const [one, two] = c.instances as [Instance, Instance]
    const ada = await c.user('Ada')
    const key = await one.client(ada.token).apiKeys.create({ body: { name: 'stub', provider: 'stub' } })
    const p = await one.client(ada.token).profiles.create({ body: { name: 'A', slug: 'a', api_key_id: key.id } })
    expect((await two.client(ada.token).profiles.get({ params: { id: p.id } })).name).toBe('A')
    await one.client(ada.token).profiles.update({ params: { id: p.id }, body: { name: 'B' } })
    expect((await two.client(ada.token).profiles.get({ params: { id: p.id } })).name).toBe('B')
  } finally {
    await c.close()
  }
})
