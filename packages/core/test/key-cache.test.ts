// Verified caller keys are cached per instance (UsersService.cacheMs): revoking a key stops it
// at once on the instance that revoked it and, with a shared coordination, on every other one
// before the revocation returns (each forgets it, or the revocation waits out the bound).
import { describe, expect, it, vi } from 'vitest'
import { manualClock, memoryCoordination, memoryHub, type Store } from '../src/index.js'
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

  it('without a shared coordination, another process trusts its cache within cacheMs and not longer', async () => {
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

  it('with a shared coordination, stops a revoked key or a removed user at once on every instance', async () => {
    // The clock stands still: only the other instance forgetting the key can refuse it.
    const clock = manualClock(1_000)
    const data = new Map<string, unknown>()
    const hub = memoryHub()
    const [a, b] = [memoryCoordination({ hub, clock }), memoryCoordination({ hub, clock })]
    const here = new UsersService({ store: mapStore(data), clock, cacheMs: 60_000, shared: a })
    const there = new UsersService({ store: mapStore(data), clock, cacheMs: 60_000, shared: b })
    try {
      const { user, key } = await here.create({ name: 'Ada' })
      const second = await here.issueKey(user.id, { name: 'second' })
      for (const token of [key.token, second.token])
        for (const users of [here, there]) expect(await users.authenticate(token)).toMatchObject({ id: user.id })

      await here.revokeKey(key.id)
      // Answered from the cache without a store read when it still trusted the key.
      expect(there.authenticate(key.token)).toBeInstanceOf(Promise)
      expect(await there.authenticate(key.token)).toBeNull()
      expect(await there.authenticate(second.token)).toMatchObject({ id: user.id })

      await there.remove(user.id)
      expect(await here.authenticate(second.token)).toBeNull()
    } finally {
      await Promise.all([here.close(), there.close(), a.close(), b.close()])
    }
  })

  it('a lookup under way while its key is revoked answers, but keeps nothing to answer from later', async () => {
    const clock = manualClock(1_000)
    const data = new Map<string, unknown>()
    const store = mapStore(data)
    let held: (() => void) | undefined
    const slow = {
      ...store,
      // The user's read of the lookup waits until the test lets it go.
      get: async <T>(key: string) => {
        if (key.startsWith('users:') && held === undefined) await new Promise<void>((r) => (held = r))
        return store.get<T>(key)
      },
    } as Store
    const users = new UsersService({ store: slow, clock, cacheMs: 60_000 })
    held = () => {}
    const { key } = await users.create({ name: 'Ada' })
    held = undefined
    const lookup = users.authenticate(key.token)
    await vi.waitFor(() => expect(held).toBeDefined())
    await users.revokeKey(key.id)
    held!()
    expect(await lookup).not.toBeNull()
    expect(users.authenticate(key.token)).toBeInstanceOf(Promise)
    expect(await users.authenticate(key.token)).toBeNull()
  })

  it('a first use recorded while its key is revoked does not bring the key back', async () => {
    // Late enough that the first use is recorded (at most once a minute per key).
    const clock = manualClock(Date.parse('2026-03-01T10:00:00Z'))
    const data = new Map<string, unknown>()
    const store = mapStore(data)
    let release: (() => void) | undefined
    const touched = new Promise<void>((r) => (release = r))
    let writing: (() => void) | undefined
    const holding = new Promise<void>((r) => (writing = r))
    const slow = {
      ...store,
      // The record of the key's use is written late: after the revocation has removed the key.
      set: async (key: string, value: unknown) => {
        const use = key.startsWith('callerkey-used:') || (value as { last_used_at?: unknown }).last_used_at
        if (use) {
          writing!()
          await touched
        }
        return store.set(key, value)
      },
    } as Store
    const users = new UsersService({ store: slow, clock, cacheMs: 60_000 })
    const { user, key } = await users.create({ name: 'Ada' })
    const first = users.authenticate(key.token)
    await holding
    await users.revokeKey(key.id)
    release!()
    expect(await first).toMatchObject({ id: user.id })
    // Another instance (no cache) asks the store: the key is gone for good.
    const elsewhere = new UsersService({ store, clock })
    expect(await elsewhere.authenticate(key.token)).toBeNull()
    expect(await users.authenticate(key.token)).toBeNull()
  })

  it('lists when a key was last used', async () => {
    const clock = manualClock(Date.parse('2026-03-01T10:00:00Z'))
    const users = new UsersService({ store: mapStore(), clock })
    const { user, key } = await users.create({ name: 'Ada' })
    expect((await users.listKeys(user.id, { page: 1, limit: 20 })).items[0]!.last_used_at).toBeNull()
    await users.authenticate(key.token)
    expect((await users.listKeys(user.id, { page: 1, limit: 20 })).items[0]!.last_used_at).toBe(
      '2026-03-01T10:00:00.000Z',
    )
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
