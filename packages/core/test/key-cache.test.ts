// Verified caller keys are cached per instance (UsersService.cacheMs): revoking a key stops it
// at once on the instance that revoked it, and within the cache bound on every other one.
import { describe, expect, it } from 'vitest'
import { manualClock, type Store } from '../src/index.js'
import { UsersService } from '../src/resources/users.js'

/** The part of a store the users service touches, over one Map (shared = two instances, one database). */
function mapStore(data = new Map<string, unknown>()): Store {
  const get = async <T>(key: string) => (data.get(key) as T | undefined) ?? null
  return {
    get,
    getMany: async <T>(keys: string[]) => Promise.all(keys.map((k) => get<T>(k))),
    set: async (key: string, value: unknown) => void data.set(key, value),
    put: async (key: string, value: unknown) => void data.set(key, value),
    remove: async (key: string) => void data.delete(key),
    keys: async (prefix: string) => [...data.keys()].filter((k) => k.startsWith(prefix)).sort(),
  } as unknown as Store
}

describe('caller key cache', () => {
  it('answers a cached key without a promise, and the first lookup with one', async () => {
    const clock = manualClock(1_000)
    const users = new UsersService({ store: mapStore(), clock })
    const { user, key } = await users.create({ name: 'Ada' })
    const first = users.authenticate(key.token)
    expect(first).toBeInstanceOf(Promise)
    expect(await first).toEqual({ id: user.id, role: 'user', key_id: key.id })
    const again = users.authenticate(key.token)
    expect(again).not.toBeInstanceOf(Promise)
    expect(again).toEqual({ id: user.id, role: 'user', key_id: key.id })
    expect(await users.authenticate('berth_sk_not-a-key')).toBeNull()
  })

  it('stops a revoked key at once here and within cacheMs on another instance', async () => {
    const clock = manualClock(1_000)
    const data = new Map<string, unknown>()
    const here = new UsersService({ store: mapStore(data), clock, cacheMs: 5_000 })
    const there = new UsersService({ store: mapStore(data), clock, cacheMs: 5_000 })
    const { user, key } = await here.create({ name: 'Ada' })
    // Both instances have verified the key: both cache it.
    expect(await here.authenticate(key.token)).toMatchObject({ id: user.id })
    expect(await there.authenticate(key.token)).toMatchObject({ id: user.id })

    await here.revokeKey(key.id)
    expect(await here.authenticate(key.token)).toBeNull()
    // The other instance trusts its cache until the bound, and not a millisecond longer.
    clock.advance(4_999)
    expect(await there.authenticate(key.token)).toMatchObject({ id: user.id })
    clock.advance(1)
    expect(await there.authenticate(key.token)).toBeNull()
  })

  it('stops every key of a removed user at once', async () => {
    const clock = manualClock(1_000)
    const users = new UsersService({ store: mapStore(), clock })
    const { user, key } = await users.create({ name: 'Ada' })
    expect(await users.authenticate(key.token)).toMatchObject({ id: user.id })
    await users.remove(user.id)
    expect(await users.authenticate(key.token)).toBeNull()
  })
})
