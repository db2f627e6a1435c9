/**
 * The transcript store on the real unstorage fs driver in a temp dir: dense `seq`, paging
 * while appends continue, immutable segments, torn writes and crashes during compaction.
 */
import { mkdtempSync, readdirSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStorage, type Storage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  EventLog,
  manualClock,
  type EventLogOptions,
  type NewEvent,
  type Store,
  type TranscriptEvent,
} from '@berth/core'
import { unstorageStore } from '../../server/src/store.js'

const OWNER = 'usr_log'
const WS = 'ws_log'
const clock = manualClock(Date.parse('2026-01-01T00:00:00Z'))

let dir: string
let storages: Storage[]
let logs: EventLog[]
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-eventlog-'))
  storages = []
  logs = []
})
afterEach(async () => {
  // Stops the background compaction timers before the dir goes.
  for (const l of logs) await l.flushAll()
  for (const s of storages) await s.dispose()
  rmSync(dir, { recursive: true, force: true })
})

/** A store over the fs driver in the test's dir (no read cache: every get reads the disk), recording calls. */
function fsStore() {
  const storage = createStorage({ driver: fsDriver({ base: dir }) })
  storages.push(storage)
  const base = unstorageStore(storage)
  const calls = { set: [] as string[], get: [] as string[], remove: [] as string[] }
  const store: Store & { calls: typeof calls; failRemoves: boolean } = {
    calls,
    failRemoves: false,
    get: (k) => {
      calls.get.push(k)
      return base.get(k)
    },
    getMany: (ks) => base.getMany(ks),
    set: (k, v) => {
      calls.set.push(k)
      return base.set(k, v)
    },
    async remove(k) {
      calls.remove.push(k)
      if (store.failRemoves) throw new Error('simulated crash: the process died before deleting')
      return base.remove(k)
    },
    keys: (p) => base.keys(p),
    put: (k, v, e) => base.put(k, v, e),
    list: (s, q) => base.list(s, q),
  }
  return store
}

/** A fresh log over a fresh storage instance on the same dir: what a restarted process sees. */
function reopen(opts: EventLogOptions = {}) {
  const store = fsStore()
  const log = new EventLog(store, clock, { flushMs: 1, idleMs: 60_000, ...opts })
  logs.push(log)
  return { store, log }
}

const segmentFiles = () => readdirSync(join(dir, 'eventlog', OWNER, WS)).sort()
const segmentPath = (name: string) => join(dir, 'eventlog', OWNER, WS, name)
const token = (i: number): NewEvent => ({ type: 'token', task_id: 'task_log', text: `t${i}` })
const tokens = (from: number, n: number) => Array.from({ length: n }, (_, i) => token(from + i))
const seqs = (events: TranscriptEvent[]) => events.map((e) => e.seq)
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i)

async function readAll(log: EventLog, page = 100): Promise<TranscriptEvent[]> {
  const out: TranscriptEvent[] = []
  for (;;) {
    const got = await log.read(OWNER, WS, { after: out.at(-1)?.seq ?? 0, limit: page })
    out.push(...got)
    if (got.length < page) return out
  }
}

describe('appending and reading', () => {
  it('gives dense seq from 1 and pages with no gap or duplicate while appends continue', async () => {
    const { log } = reopen({ flushMs: 2, segmentEvents: 50, compactAfter: 4 })
    let appended = 0
    let writing = true
    const writer = (async () => {
      while (appended < 3000) {
        const n = 1 + (appended % 7)
        const placed = await log.append(OWNER, WS, tokens(appended, n))
        expect(seqs(placed)).toEqual(range(appended + 1, appended + n))
        appended += n
        // Real time is the point: the reader pages while the writer's flush timer fires between appends.
        if (appended % 5 === 0) await new Promise((r) => setTimeout(r, 1))
      }
      writing = false
    })()
    const seen: number[] = []
    let pages = 0
    while (writing || seen.length < appended) {
      const page = await log.read(OWNER, WS, { after: seen.at(-1) ?? 0, limit: 37 })
      seen.push(...seqs(page))
      pages++
      // The reader keeps paging while the writer runs: an empty page only means "not yet".
      if (page.length === 0) await new Promise((r) => setTimeout(r, 1))
    }
    await writer
    expect(pages).toBeGreaterThan(20)
    expect(seen).toEqual(range(1, appended))
    // Texts stayed with their seq through flushes and compactions.
    const all = await readAll(log)
    expect(all.map((e) => e.text)).toEqual(range(0, appended - 1).map((i) => `t${i}`))
    expect(await log.count(OWNER, WS)).toBe(appended)
  })

  it('filters by task and reads what is still buffered', async () => {
    const { log } = reopen({ flushMs: 60_000 })
    await log.append(OWNER, WS, [token(0), { type: 'token', task_id: 'task_other', text: 'x' }, token(1)])
    expect(seqs(await log.read(OWNER, WS, { after: 0, limit: 10, taskId: 'task_log' }))).toEqual([1, 3])
    expect(seqs(await log.read(OWNER, WS, { after: 1, limit: 1 }))).toEqual([2])
  })

  it('never writes a stored key twice: each flush adds a new segment', async () => {
    const { log, store } = reopen({ segmentEvents: 1000, compactAfter: 1000 })
    for (let i = 0; i < 20; i++) {
      await log.append(OWNER, WS, tokens(i * 10, 10))
      await log.flush(OWNER, WS)
    }
    expect(store.calls.set).toHaveLength(20)
    expect(new Set(store.calls.set).size).toBe(20)
    expect(store.calls.remove).toEqual([])
    expect(segmentFiles()).toHaveLength(20)
    expect(segmentFiles()[0]).toBe('000000000001-000000000010')
  })

  it('a reopened log reads `after=N` from the segments it needs only', async () => {
    const first = reopen({ segmentEvents: 1000, compactAfter: 4 })
    for (let i = 0; i < 100; i++) {
      await first.log.append(OWNER, WS, tokens(i * 100, 100))
      await first.log.flush(OWNER, WS)
    }
    await first.log.flushAll()
    const files = segmentFiles()
    expect(files.length).toBeLessThan(20)
    const { log, store } = reopen()
    const page = await log.read(OWNER, WS, { after: 9_950, limit: 100 })
    expect(seqs(page)).toEqual(range(9_951, 10_000))
    // The newest segment (checked when opening) and nothing else.
    expect(new Set(store.calls.get).size).toBe(1)
    const middle = await log.read(OWNER, WS, { after: 4_321, limit: 5 })
    expect(seqs(middle)).toEqual(range(4_322, 4_326))
    expect(new Set(store.calls.get).size).toBe(2)
  })
})

describe('crashes', () => {
  it('a torn newest segment never affects earlier events; the log reopens after the last intact one', async () => {
    const a = reopen({ compactAfter: 1000 })
    for (let i = 0; i < 5; i++) {
      await a.log.append(OWNER, WS, tokens(i * 10, 10))
      await a.log.flush(OWNER, WS)
    }
    const files = segmentFiles()
    expect(files).toHaveLength(5)
    // The process died while writing the newest segment: only part of it reached the disk.
    truncateSync(segmentPath(files[4]!), 37)

    const b = reopen()
    expect(await b.log.count(OWNER, WS)).toBe(40)
    const kept = await readAll(b.log)
    expect(seqs(kept)).toEqual(range(1, 40))
    expect(kept.map((e) => e.text)).toEqual(range(0, 39).map((i) => `t${i}`))
    expect(segmentFiles()).toEqual(files.slice(0, 4))
    // Appends continue densely after the last intact event.
    const placed = await b.log.append(OWNER, WS, tokens(100, 3))
    expect(seqs(placed)).toEqual([41, 42, 43])
    await b.log.flush(OWNER, WS)

    // Garbage instead of JSON, and an empty file, are torn too.
    writeFileSync(segmentPath(segmentFiles().at(-1)!), '\u0000\u0000{"first":41,"last":43,"ev')
    const c = reopen()
    expect(seqs(await readAll(c.log))).toEqual(range(1, 40))
    await c.log.append(OWNER, WS, tokens(200, 2))
    await c.log.flush(OWNER, WS)
    writeFileSync(segmentPath(segmentFiles().at(-1)!), '')
    const d = reopen()
    expect(await d.log.count(OWNER, WS)).toBe(40)
    expect(seqs(await readAll(d.log))).toEqual(range(1, 40))
  })

  it('a damaged older segment (not something a crash does) leaves a gap, never an error', async () => {
    const a = reopen({ compactAfter: 1000 })
    for (let i = 0; i < 3; i++) {
      await a.log.append(OWNER, WS, tokens(i * 10, 10))
      await a.log.flush(OWNER, WS)
    }
    writeFileSync(segmentPath(segmentFiles()[1]!), 'not json')
    const b = reopen()
    expect(seqs(await readAll(b.log))).toEqual([...range(1, 10), ...range(21, 30)])
    expect(await b.log.count(OWNER, WS)).toBe(30)
  })
})

describe('compaction', () => {
  it('merges small segments into one, keeping every event and its order', async () => {
    const { log, store } = reopen({ segmentEvents: 100, compactAfter: 4 })
    for (let i = 0; i < 4; i++) {
      await log.append(OWNER, WS, tokens(i * 5, 5))
      await log.flush(OWNER, WS)
    }
    expect(segmentFiles()).toEqual(['000000000001-000000000020'])
    // The merged segment was written under a new key before the parts went.
    const merged = store.calls.set.indexOf('eventlog:usr_log:ws_log:000000000001-000000000020')
    expect(merged).toBe(4)
    expect(store.calls.remove).toHaveLength(4)
    expect(new Set(store.calls.set).size).toBe(store.calls.set.length)
    expect((await readAll(log)).map((e) => e.text)).toEqual(range(0, 19).map((i) => `t${i}`))
    // And from disk.
    expect((await readAll(reopen().log)).map((e) => e.text)).toEqual(range(0, 19).map((i) => `t${i}`))
  })

  it('merges small segments that a large flush left behind, not only the newest ones', async () => {
    const { log } = reopen({ segmentEvents: 100, compactAfter: 4 })
    const flushOf = async (n: number) => {
      await log.append(OWNER, WS, tokens(await log.count(OWNER, WS), n))
      await log.flush(OWNER, WS)
    }
    for (const n of [5, 5, 5, 80, 5]) await flushOf(n)
    expect(segmentFiles()).toHaveLength(5)
    await flushOf(5)
    // 1-15 merged; the large 16-95 stays; 96-105 merged.
    expect(segmentFiles()).toEqual([
      '000000000001-000000000015',
      '000000000016-000000000095',
      '000000000096-000000000105',
    ])
    expect(seqs(await readAll(reopen().log))).toEqual(range(1, 105))
  })

  it('compacts the tail once the log is idle', async () => {
    const { log } = reopen({ segmentEvents: 100, compactAfter: 1000, idleMs: 30 })
    for (let i = 0; i < 3; i++) {
      await log.append(OWNER, WS, tokens(i * 5, 5))
      await log.flush(OWNER, WS)
    }
    expect(segmentFiles()).toHaveLength(3)
    await vi.waitFor(() => expect(segmentFiles()).toEqual(['000000000001-000000000015']), 5_000)
    // The idle log was let go from memory; it reopens from the store.
    expect(seqs(await readAll(log))).toEqual(range(1, 15))
    const more = await log.append(OWNER, WS, tokens(15, 2))
    expect(seqs(more)).toEqual([16, 17])
  })

  it('a crash between writing the merged segment and deleting the parts loses nothing', async () => {
    const a = reopen({ segmentEvents: 100, compactAfter: 3 })
    a.store.failRemoves = true
    for (let i = 0; i < 3; i++) {
      await a.log.append(OWNER, WS, tokens(i * 10, 10))
      await a.log.flush(OWNER, WS)
    }
    // Both the merged segment and its parts are on disk.
    expect(segmentFiles()).toEqual([
      '000000000001-000000000010',
      '000000000001-000000000030',
      '000000000011-000000000020',
      '000000000021-000000000030',
    ])
    // Readers of the crashed process never saw a duplicate.
    expect(seqs(await readAll(a.log))).toEqual(range(1, 30))

    const b = reopen()
    expect(seqs(await readAll(b.log))).toEqual(range(1, 30))
    // Opening finished the compaction: the intact merged segment stays, the parts go.
    expect(segmentFiles()).toEqual(['000000000001-000000000030'])
    expect(seqs(await b.log.append(OWNER, WS, tokens(30, 1)))).toEqual([31])
  })

  it('a crash while writing the merged segment keeps the parts', async () => {
    const a = reopen({ segmentEvents: 100, compactAfter: 3 })
    a.store.failRemoves = true
    for (let i = 0; i < 3; i++) {
      await a.log.append(OWNER, WS, tokens(i * 10, 10))
      await a.log.flush(OWNER, WS)
    }
    truncateSync(segmentPath('000000000001-000000000030'), 100)
    const b = reopen()
    const all = await readAll(b.log)
    expect(seqs(all)).toEqual(range(1, 30))
    expect(all.map((e) => e.text)).toEqual(range(0, 29).map((i) => `t${i}`))
    expect(segmentFiles()).toEqual([
      '000000000001-000000000010',
      '000000000011-000000000020',
      '000000000021-000000000030',
    ])
  })

  it('readers de-duplicate while a compaction replaces segments under them', async () => {
    const { log } = reopen({ flushMs: 1, segmentEvents: 40, compactAfter: 2 })
    const reads: Promise<number[]>[] = []
    for (let i = 0; i < 200; i++) {
      await log.append(OWNER, WS, tokens(i * 3, 3))
      if (i % 3 === 0) await log.flush(OWNER, WS)
      reads.push(log.read(OWNER, WS, { after: Math.max(0, i * 3 - 20), limit: 100 }).then(seqs))
    }
    for (const [i, got] of (await Promise.all(reads)).entries()) {
      const from = Math.max(0, i * 3 - 20) + 1
      expect(got).toEqual(range(from, from + got.length - 1))
      expect(got.at(-1)).toBeGreaterThanOrEqual(i * 3 + 3)
    }
  })

  it('remove drops every segment', async () => {
    const { log, store } = reopen()
    await log.append(OWNER, WS, tokens(0, 5))
    await log.flush(OWNER, WS)
    await log.append(OWNER, WS, tokens(5, 5))
    await log.remove(OWNER, WS)
    expect(await store.keys('eventlog:')).toEqual([])
    expect(await log.count(OWNER, WS)).toBe(0)
    expect(seqs(await log.append(OWNER, WS, tokens(0, 1)))).toEqual([1])
  })
})
