/**
 * The read cache behind `GET /v1/profiles/:id` (`ViewCache`): a view is read once per bound,
 * a drop is seen by the next read, a read that overlaps a drop never stores its older answer,
 * and the cache holds at most its maximum.
 */
import { describe, expect, it, vi } from 'vitest'
import { memoryCoordination } from '../src/coordination/memory.js'
import { manualClock } from '../src/ports/clock.js'
import { ViewCache } from '../src/records/view-cache.js'

function counted<V>(values: V[]) {
  let reads = 0
  return {
    load: async () => values[Math.min(reads++, values.length - 1)]!,
    reads: () => reads,
  }
}

describe('ViewCache', () => {
  it('answers from memory within its bound and reads again after it', async () => {
    const clock = manualClock(1_000)
    const cache = new ViewCache<{ v: number }>(clock, 500)
    const src = counted([{ v: 1 }, { v: 2 }])
    expect(await cache.read('k', src.load)).toEqual({ v: 1 })
    clock.advance(499)
    expect(await cache.read('k', src.load)).toEqual({ v: 1 })
    expect(src.reads()).toBe(1)
    clock.advance(1)
    expect(await cache.read('k', src.load)).toEqual({ v: 2 })
    expect(src.reads()).toBe(2)
  })

  it('reads again at once after a drop', async () => {
    const cache = new ViewCache<string>(manualClock(0), 60_000)
    const src = counted(['old', 'new'])
    await cache.read('k', src.load)
    cache.drop('k')
    expect(await cache.read('k', src.load)).toBe('new')
  })

  it('does not keep what a read got when a drop came while it read', async () => {
    const cache = new ViewCache<string>(manualClock(0), 60_000)
    let release!: () => void
    const slow = cache.read('k', () => new Promise<string>((r) => (release = () => r('old'))))
    cache.drop('k') // the record was written while the slow read was under way
    release()
    expect(await slow).toBe('old')
    expect(await cache.read('k', async () => 'new')).toBe('new')
  })

  it('keeps at most its maximum, dropping the oldest, and shares frozen views', async () => {
    const cache = new ViewCache<{ k: string }>(manualClock(0), 60_000, 2)
    for (const k of ['a', 'b', 'c']) await cache.read(k, async () => ({ k }))
    const again = counted([{ k: 'a2' }])
    expect(await cache.read('a', again.load)).toEqual({ k: 'a2' })
    expect(Object.isFrozen(await cache.read('c', async () => ({ k: 'x' })))).toBe(true)
  })

  it('with a bound of 0, reads every time', async () => {
    const cache = new ViewCache<number>(manualClock(0), 0)
    const src = counted([1, 2])
    await cache.read('k', src.load)
    expect(await cache.read('k', src.load)).toBe(2)
  })
})

describe('ViewCache over a shared channel', () => {
  it("a drop on one instance drops the other's entry when the message arrives; closed, it no longer listens", async () => {
    const coordination = memoryCoordination({ clock: manualClock(0) })
    const shared = { pubsub: coordination.pubsub, channel: 'view-cache:test' }
    const one = new ViewCache<string>(manualClock(0), 60_000, 10, shared)
    const two = new ViewCache<string>(manualClock(0), 60_000, 10, shared)
    await Promise.all([one.read('k', async () => 'old'), two.read('k', async () => 'old')])
    one.drop('k')
    await vi.waitFor(async () => expect(await two.read('k', async () => 'new')).toBe('new'))
    await two.close()
    one.drop('k')
    await new Promise((r) => setTimeout(r, 20))
    expect(await two.read('k', async () => 'newer')).toBe('new')
    await one.close()
    await coordination.close?.()
  })
})
