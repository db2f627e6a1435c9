import { createStorage } from 'unstorage'
import { expect, it } from 'vitest'
import { unstorageStore } from '@berth/server'

it('the read cache follows this process’s writes and hands out copies', async () => {
  const storage = createStorage()
  const store = unstorageStore(storage, { cache: true, cacheEntries: 2 })
  await store.set('a:1', { n: 1 })
  const got = await store.get<{ n: number }>('a:1')
  got!.n = 99
  expect(await store.get('a:1')).toEqual({ n: 1 })
  await store.set('a:1', { n: 2 })
  expect(await store.getMany(['a:1', 'a:missing'])).toEqual([{ n: 2 }, null])
  await store.remove('a:1')
  expect(await store.get('a:1')).toBeNull()
  // Bounded: the oldest entry falls out and is read from storage again.
  await store.set('b:1', { v: 1 })
  await store.set('b:2', { v: 2 })
  await store.set('b:3', { v: 3 })
  await storage.setItem('b:1', { v: 'changed underneath' })
  expect(await store.get('b:1')).toEqual({ v: 'changed underneath' })
  expect(await store.keys('b:')).toEqual(['b:1', 'b:2', 'b:3'])
})

it('without the cache every read goes to storage (safe for shared stores)', async () => {
  const storage = createStorage()
  const store = unstorageStore(storage)
  await store.set('k:1', { v: 1 })
  await storage.setItem('k:1', { v: 2 })
  expect(await store.get('k:1')).toEqual({ v: 2 })
})
