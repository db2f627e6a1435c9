import type { ChildProcess } from 'node:child_process'
import { indexEntryFor, type IndexEntry, type Store, type StoredEntry } from '@berth/core'
import { afterEach, describe, expect, it } from 'vitest'
import { STATUSES, keyOf, put, record, type Rec } from './store-writer.js'

const all = { offset: 0, limit: 1_000_000 }

/** One storage a test works on: a fresh, empty store, and how to open it again. */
export interface StoreUnderTest {
  store: Store
  /** Close this store and open the same storage again, as a restarted server would. */
  reopen?(): Promise<Store>
  /**
   * Start another process writing to the same storage through the driver: it must call
   * `runStoreWriter` (`@berth/testkit/store-writer`) and is killed (SIGKILL) mid-write by the crash test.
   */
  spawnWriter?(): ChildProcess
  /** Remove what the storage left behind (files, keys). */
  cleanup?(): Promise<void>
}

/** Every listed and stored record of an owner agree: no lost and no phantom rows. */
async function expectConsistent(store: Store, owner: string): Promise<number> {
  const scope = `tasks:${owner}`
  const keys = await store.keys(`${scope}:`)
  const stored = (await store.getMany<Rec>(keys)).filter((r): r is Rec => r !== null)
  const listed = await store.list<Rec>(scope, all)
  expect(listed.total).toBe(stored.length)
  expect(listed.items.map((r) => r.id).sort()).toEqual(stored.map((r) => r.id).sort())
  for (const status of STATUSES) {
    const page = await store.list<Rec>(scope, { term: `status=${status}`, ...all })
    const want = stored.filter((r) => r.status === status)
    expect(page.total).toBe(want.length)
    expect(page.items.map((r) => r.id).sort()).toEqual(want.map((r) => r.id).sort())
  }
  return stored.length
}

/**
 * The conformance suite every `Store` driver passes (unstorage-style: pass a factory).
 * Covers values, prefix reads, ordered and filtered lists with counts, updates that move a
 * record between filtered lists, removal, other owners' records staying out, and, when the
 * factory can, a restart and a crash of a writer between records and their indexes.
 *
 * @example
 * ```ts
 * storeConformanceSuite('memory', () => ({ store: memoryStore() }))
 * ```
 */
export function storeConformanceSuite(name: string, open: () => StoreUnderTest | Promise<StoreUnderTest>): void {
  describe(`Store conformance: ${name}`, () => {
    let opened: StoreUnderTest[] = []
    const fresh = async () => {
      const s = await open()
      opened.push(s)
      return s
    }
    afterEach(async () => {
      for (const s of opened) await s.cleanup?.()
      opened = []
    })

    it('stores JSON values by key and hands out copies', async () => {
      const { store } = await fresh()
      expect(await store.get('misc:a')).toBeNull()
      await store.set('misc:a', { n: 1, list: ['x'], nested: { ok: true } })
      const got = await store.get<{ n: number }>('misc:a')
      got!.n = 99
      expect(await store.get('misc:a')).toEqual({ n: 1, list: ['x'], nested: { ok: true } })
      await store.set('misc:b', 'text')
      expect(await store.getMany(['misc:b', 'misc:none', 'misc:a'])).toEqual([
        'text',
        null,
        { n: 1, list: ['x'], nested: { ok: true } },
      ])
      await store.remove('misc:a')
      await store.remove('misc:never')
      expect(await store.get('misc:a')).toBeNull()
    })

    it('reads keys by exact prefix only', async () => {
      const { store } = await fresh()
      for (const k of ['pool:a:1', 'pool:a:2', 'pool:ab:3', 'pool:b:4', 'poolx:a:5', 'events:u1:ws1:000-001'])
        await store.set(k, { k })
      expect((await store.keys('pool:a:')).sort()).toEqual(['pool:a:1', 'pool:a:2'])
      expect((await store.keys('pool:')).sort()).toEqual(['pool:a:1', 'pool:a:2', 'pool:ab:3', 'pool:b:4'])
      expect(await store.keys('events:u1:ws1:')).toEqual(['events:u1:ws1:000-001'])
      expect(await store.keys('nothing:')).toEqual([])
      await store.remove('pool:a:1')
      expect(await store.keys('pool:a:')).toEqual(['pool:a:2'])
    })

    it('lists a scope newest first, page by page, with the count', async () => {
      const { store } = await fresh()
      // Written out of order: the order key decides, not the write order.
      const ns = [5, 1, 9, 3, 7, 2, 8, 0, 6, 4]
      for (const n of ns) await put(store, record('usr_a', n))
      const page1 = await store.list<Rec>('tasks:usr_a', { offset: 0, limit: 4 })
      expect(page1.total).toBe(10)
      expect(page1.items.map((r) => r.n)).toEqual([9, 8, 7, 6])
      expect((await store.list<Rec>('tasks:usr_a', { offset: 4, limit: 4 })).items.map((r) => r.n)).toEqual([
        5, 4, 3, 2,
      ])
      const last = await store.list<Rec>('tasks:usr_a', { offset: 8, limit: 4 })
      expect(last.items.map((r) => r.n)).toEqual([1, 0])
      expect(last.total).toBe(10)
      expect(await store.list('tasks:usr_a', { offset: 10, limit: 4 })).toEqual({ items: [], total: 10 })
      expect(await store.list('tasks:usr_nobody', { offset: 0, limit: 4 })).toEqual({ items: [], total: 0 })
      // Values come back whole, and ties in the order key fall back to the id.
      expect(page1.items[0]).toEqual(record('usr_a', 9))
    })

    it('keeps filtered lists and their counts with every write', async () => {
      const { store } = await fresh()
      for (let n = 0; n < 12; n++) await put(store, record('usr_a', n))
      const running = () => store.list<Rec>('tasks:usr_a', { term: 'status=running', offset: 0, limit: 100 })
      expect((await running()).items.map((r) => r.n)).toEqual([9, 5, 1])
      expect((await running()).total).toBe(3)
      const both = await store.list<Rec>('tasks:usr_a', { term: 'mode=session,status=running', offset: 0, limit: 2 })
      expect(both).toEqual({ items: [record('usr_a', 9), record('usr_a', 5)], total: 3 })
      expect(
        (await store.list<Rec>('tasks:usr_a', { term: 'mode=batch,status=running', offset: 0, limit: 9 })).total,
      ).toBe(0)
      // An update moves the record between filtered lists; its place in the whole list stays.
      await put(store, { ...record('usr_a', 5), status: 'completed', updated_at: '2027-01-01T00:00:00.000Z' })
      expect((await running()).items.map((r) => r.n)).toEqual([9, 1])
      expect((await running()).total).toBe(2)
      const completed = await store.list<Rec>('tasks:usr_a', { term: 'status=completed', offset: 0, limit: 100 })
      expect(completed.items.map((r) => r.n)).toEqual([10, 6, 5, 2])
      expect(completed.items[2]!.updated_at).toBe('2027-01-01T00:00:00.000Z')
      const whole = await store.list<Rec>('tasks:usr_a', all)
      expect(whole.total).toBe(12)
      expect(whole.items.map((r) => r.n)).toEqual([11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
      // A rewrite with the same entry changes the value only.
      await put(store, { ...record('usr_a', 9), updated_at: '2027-02-02T00:00:00.000Z' })
      expect(await running()).toEqual({
        items: [{ ...record('usr_a', 9), updated_at: '2027-02-02T00:00:00.000Z' }, record('usr_a', 1)],
        total: 2,
      })
    })

    it('removing a record, or overwriting it outside the index, takes it out of every list', async () => {
      const { store } = await fresh()
      for (let n = 0; n < 6; n++) await put(store, record('usr_a', n))
      await store.remove(keyOf(record('usr_a', 5)))
      await store.remove(keyOf(record('usr_a', 5)))
      expect(await store.get(keyOf(record('usr_a', 5)))).toBeNull()
      const whole = await store.list<Rec>('tasks:usr_a', all)
      expect(whole.items.map((r) => r.n)).toEqual([4, 3, 2, 1, 0])
      expect(whole.total).toBe(5)
      expect((await store.list<Rec>('tasks:usr_a', { term: 'status=running', ...all })).items.map((r) => r.n)).toEqual([
        1,
      ])
      // A plain `set` is not a listed record any more (no stale entry pointing at it).
      await store.set(keyOf(record('usr_a', 4)), { note: 'not a task' })
      expect((await store.list<Rec>('tasks:usr_a', all)).items.map((r) => r.n)).toEqual([3, 2, 1, 0])
      expect((await store.list('tasks:usr_a', { term: 'status=queued', ...all })).total).toBe(1)
      expect(await store.get(keyOf(record('usr_a', 4)))).toEqual({ note: 'not a task' })
    })

    it("keeps each owner's lists apart, even owners whose ids share a prefix", async () => {
      const { store } = await fresh()
      for (let n = 0; n < 5; n++) await put(store, record('usr_1', n))
      for (let n = 0; n < 7; n++) await put(store, record('usr_10', 100 + n))
      const one = await store.list<Rec>('tasks:usr_1', all)
      expect(one.total).toBe(5)
      expect(one.items.every((r) => r.owner_id === 'usr_1')).toBe(true)
      const ten = await store.list<Rec>('tasks:usr_10', { term: 'mode=batch', ...all })
      expect(ten.items.map((r) => r.n)).toEqual([106, 104, 102, 100])
      expect((await store.keys('tasks:usr_1:')).length).toBe(5)
    })

    it('lists every record of a large scope exactly once, from either end', async () => {
      const { store } = await fresh()
      for (let n = 0; n < 250; n++) await put(store, record('usr_big', n))
      const seen: number[] = []
      for (let offset = 0; offset < 250; offset += 30) {
        const page = await store.list<Rec>('tasks:usr_big', { offset, limit: 30 })
        expect(page.total).toBe(250)
        seen.push(...page.items.map((r) => r.n))
      }
      expect(seen).toEqual(Array.from({ length: 250 }, (_, i) => 249 - i))
      const queued = await store.list<Rec>('tasks:usr_big', { term: 'status=queued', offset: 60, limit: 5 })
      expect(queued.total).toBe(63)
      expect(queued.items.map((r) => r.n)).toEqual([8, 4, 0])
    })

    it('pages by key (after): every record once, newest first, while records are added', async () => {
      const { store } = await fresh()
      const orderOf = (r: Rec) => indexEntryFor(keyOf(r), r)!.order
      for (let n = 0; n < 200; n += 2) await put(store, record('usr_k', n))
      const added: number[] = []
      const walk = async (term: string | undefined, limit: number) => {
        const seen: Rec[] = []
        let after: string | undefined
        for (let round = 0; round < 500; round++) {
          const page = await store.list<Rec>('tasks:usr_k', { term, offset: 0, limit, after })
          expect(page.items.length).toBeLessThanOrEqual(limit)
          if (page.items.length === 0) return seen
          seen.push(...page.items)
          const last = page.items[page.items.length - 1]!
          after = orderOf(last)
          // Meanwhile: a record newer than every page (above the cursor, not in this walk)
          // and one older than the cursor (below it: the walk reaches it).
          await put(store, record('usr_k', 10_000 + round * 10 + seen.length))
          if (last.n % 2 === 0 && last.n > 0) {
            await put(store, record('usr_k', last.n - 1))
            added.push(last.n - 1)
          }
        }
        throw new Error('the walk did not end')
      }
      const whole = await walk(undefined, 7)
      const ns = whole.map((r) => r.n)
      expect(ns.every((n, i) => i === 0 || n < ns[i - 1]!)).toBe(true) // in order, no duplicate
      for (let n = 0; n < 200; n += 2) expect(ns).toContain(n) // no record older than the cursor skipped
      expect(added.length).toBeGreaterThan(10)
      for (const n of added) expect(ns).toContain(n) // rows added below the cursor are reached
      expect(ns.some((n) => n >= 10_000)).toBe(false)
      // A filtered walk reads its own index only.
      const completed = await walk('status=completed', 5)
      expect(completed.length).toBeGreaterThan(0)
      expect(completed.every((r) => r.status === 'completed')).toBe(true)
      const cs = completed.map((r) => r.n)
      expect(cs.every((n, i) => i === 0 || n < cs[i - 1]!)).toBe(true)
      for (let n = 2; n < 200; n += 4) expect(cs).toContain(n)
      // The count is the index's, whatever the cursor; the end is an empty page.
      for (const n of [1, 3, 5]) await put(store, record('usr_k', n))
      const before = (await store.list<Rec>('tasks:usr_k', { offset: 0, limit: 1 })).total
      const tail = await store.list<Rec>('tasks:usr_k', { offset: 0, limit: 3, after: orderOf(record('usr_k', 4)) })
      expect(tail.items.map((r) => r.n)).toEqual([3, 2, 1])
      expect(tail.total).toBe(before)
      const skipped = await store.list<Rec>('tasks:usr_k', { offset: 2, limit: 3, after: orderOf(record('usr_k', 4)) })
      expect(skipped.items.map((r) => r.n)).toEqual([1, 0])
      expect(
        (await store.list<Rec>('tasks:usr_k', { offset: 0, limit: 3, after: orderOf(record('usr_k', 0)) })).items,
      ).toEqual([])
      // An order that is no record's still places the page (keyset, not lookup).
      const between = await store.list<Rec>('tasks:usr_k', {
        offset: 0,
        limit: 2,
        after: `${record('usr_k', 6).created_at}~`,
      })
      expect(between.items.map((r) => r.n)).toEqual([6, 5])
    })

    it('hands out every key with its value and index entry, in key order, when it can (entries)', async () => {
      const { store } = await fresh()
      if (!store.entries) return expect(store.entries).toBeUndefined()
      for (let n = 0; n < 6; n++) await put(store, record('usr_a', n))
      // Moved to another filtered list, set outside any index, removed, a plain value.
      await put(store, { ...record('usr_a', 2), status: 'completed' })
      await store.set(keyOf(record('usr_a', 4)), { note: 'not a task' })
      await store.remove(keyOf(record('usr_a', 5)))
      await store.set('misc:b', ['x'])
      const got: StoredEntry[] = []
      for await (const e of store.entries()) got.push(e)
      const sorted = (e: IndexEntry | null) =>
        e && { scope: e.scope, order: e.order, terms: [...(e.terms ?? [])].sort() }
      const want = [0, 1, 2, 3, 4]
        .map((n) => keyOf(record('usr_a', n)))
        .concat('misc:b')
        .sort()
      expect(got.map((e) => e.key)).toEqual(want)
      for (const e of got) {
        const value = await store.get(e.key)
        expect(e.value).toEqual(value)
        expect(sorted(e.index)).toEqual(sorted(indexEntryFor(e.key, value)))
      }
      expect(got.find((e) => e.key === keyOf(record('usr_a', 2)))!.index!.terms).toContain('status=completed')
    })

    it('keeps values, lists and counts across a restart', async () => {
      const s = await fresh()
      if (!s.reopen) return expect(s.reopen).toBeUndefined() // memory: nothing outlives the process
      for (let n = 0; n < 20; n++) await put(s.store, record('usr_a', n))
      await s.store.set('misc:x', { kept: true })
      await put(s.store, { ...record('usr_a', 3), status: 'running' })
      await s.store.remove(keyOf(record('usr_a', 19)))
      const again = await s.reopen()
      expect(await again.get('misc:x')).toEqual({ kept: true })
      const page = await again.list<Rec>('tasks:usr_a', { offset: 0, limit: 3 })
      expect(page).toEqual({ items: [record('usr_a', 18), record('usr_a', 17), record('usr_a', 16)], total: 19 })
      expect((await again.list<Rec>('tasks:usr_a', { term: 'status=running', ...all })).items.map((r) => r.n)).toEqual([
        17, 13, 9, 5, 3, 1,
      ])
      await expectConsistent(again, 'usr_a')
    })

    it('a writer killed mid-write leaves no lost and no phantom rows', async () => {
      const s = await fresh()
      if (!s.spawnWriter || !s.reopen) return expect(s.spawnWriter).toBeUndefined()
      for (let round = 0; round < 3; round++) {
        const child = s.spawnWriter()
        await new Promise<void>((resolve, reject) => {
          let out = ''
          child.stdout!.on('data', (d: Buffer) => {
            out += d.toString()
            if (out.includes('ready')) resolve()
          })
          child.on('exit', (code) => reject(new Error(`writer exited (${code}) before it was ready: ${out}`)))
        })
        // Let it run on for a moment, then kill it wherever it is.
        await new Promise((r) => setTimeout(r, 20 + Math.floor(Math.random() * 80)))
        const exited = new Promise((r) => child.once('exit', r))
        child.kill('SIGKILL')
        await exited
        const store = await s.reopen()
        expect(await expectConsistent(store, 'crash')).toBeGreaterThan(150)
      }
    })
  })
}
