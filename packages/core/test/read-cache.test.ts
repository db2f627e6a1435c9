// The read cache of views (records/read-cache.ts) never answers a view its record no longer
// has: every write through the watched store forgets the key, a read under way across a write
// keeps nothing, and with several instances only final records are kept.
import { describe, expect, it } from 'vitest'
import type { IndexEntry, Store } from '../src/index.js'
import { ReadCache } from '../src/records/read-cache.js'

/** A map as a store; `hold` makes the next get wait until the test lets it go. */
function mapStore() {
  const data = new Map<string, unknown>()
  let gate: Promise<void> | undefined
  const store = {
    reads: 0,
    get: async <T>(key: string) => {
      store.reads++
      const value = data.get(key)
      await gate
      return (value as T | undefined) ?? null
    },
    getMany: async () => [],
    keys: async () => [],
    list: async () => ({ items: [], total: 0 }),
    set: async (key: string, value: unknown) => void data.set(key, structuredClone(value)),
    put: async (key: string, value: unknown, _e: IndexEntry) => void data.set(key, structuredClone(value)),
    remove: async (key: string) => void data.delete(key),
    /** The next read returns the value it found now, once `release` is called. */
    hold(): () => void {
      let release = () => {}
      gate = new Promise<void>((r) => (release = r))
      return () => {
        gate = undefined
        release()
      }
    },
  }
  return store
}

type Rec = { id: string; status: string; secret?: string }
const view = (r: Rec) => ({ id: r.id, status: r.status })
const entry: IndexEntry = { scope: 'tasks:u', order: '1', terms: [] }

function setup(shared = false) {
  const raw = mapStore()
  const reads = new ReadCache({ shared })
  const store: Store = reads.watch(raw as unknown as Store)
  const read = (key: string, final?: (r: Rec) => boolean) => reads.view(key, () => store.get<Rec>(key), view, final)
  return { raw, store, read, reads }
}

describe('read cache', () => {
  it('answers a view from memory until its key is written, then reads the store again', async () => {
    const { raw, store, read } = setup()
    await store.put('tasks:u:1', { id: '1', status: 'running', secret: 's' }, entry)
    expect(await read('tasks:u:1')).toEqual({ id: '1', status: 'running' })
    expect(await read('tasks:u:1')).toEqual({ id: '1', status: 'running' })
    expect(raw.reads).toBe(1)
    await store.put('tasks:u:1', { id: '1', status: 'completed' }, entry)
    expect(await read('tasks:u:1')).toEqual({ id: '1', status: 'completed' })
    await store.set('tasks:u:1', { id: '1', status: 'failed' })
    expect(await read('tasks:u:1')).toEqual({ id: '1', status: 'failed' })
    await store.remove('tasks:u:1')
    expect(await read('tasks:u:1')).toBeNull()
    expect(raw.reads).toBe(4)
  })

  it('a read under way across a write answers what it read but keeps nothing', async () => {
    const { raw, store, read } = setup()
    await store.put('tasks:u:1', { id: '1', status: 'running' }, entry)
    const release = raw.hold()
    const slow = read('tasks:u:1')
    await store.put('tasks:u:1', { id: '1', status: 'completed' }, entry)
    release()
    expect((await slow)?.status).toBe('running')
    expect((await read('tasks:u:1'))?.status).toBe('completed')
  })

  it('with several instances, keeps only the views of final records', async () => {
    const { raw, store, read } = setup(true)
    const ended = (r: Rec) => r.status === 'completed'
    await store.put('tasks:u:1', { id: '1', status: 'running' }, entry)
    await read('tasks:u:1', ended)
    await read('tasks:u:1', ended)
    expect(raw.reads).toBe(2)
    // Another instance ends it, writing the shared store directly: this one reads the store.
    await raw.put('tasks:u:1', { id: '1', status: 'completed' }, entry)
    expect((await read('tasks:u:1', ended))?.status).toBe('completed')
    await read('tasks:u:1', ended)
    expect(raw.reads).toBe(3)
  })

  it('keeps views within its byte bound, the oldest going first; 0 keeps none', async () => {
    const raw = mapStore()
    const reads = new ReadCache({ shared: false, maxBytes: 16 * 100 })
    const store = reads.watch(raw as unknown as Store)
    const read = (key: string) => reads.view(key, () => store.get<Rec>(key), view)
    for (let i = 0; i < 60; i++) await store.put(`k:${i}`, { id: String(i), status: 'x'.repeat(20) }, entry)
    for (let i = 0; i < 60; i++) await read(`k:${i}`)
    raw.reads = 0
    await read('k:59')
    expect(raw.reads).toBe(0)
    await read('k:0')
    expect(raw.reads).toBe(1)

    const off = new ReadCache({ shared: false, maxBytes: 0 })
    const offStore = off.watch(raw as unknown as Store)
    raw.reads = 0
    for (let i = 0; i < 3; i++) await off.view('k:1', () => offStore.get<Rec>('k:1'), view)
    expect(raw.reads).toBe(3)
  })

  it('views are frozen: no reader can change what the next one gets', async () => {
    const { store, read } = setup()
    await store.put('tasks:u:1', { id: '1', status: 'running' }, entry)
    await read('tasks:u:1')
    const cached = (await read('tasks:u:1')) as { status: string }
    expect(() => {
      cached.status = 'completed'
    }).toThrow(TypeError)
  })
})
