import { manualClock, memoryCoordination, memoryHub, tokenBucket } from '@berth/core'
import { coordinationConformanceSuite } from '@berth/testkit'
import { describe, expect, it } from 'vitest'

// Several instances on one hub, as redis instances share one server.
coordinationConformanceSuite('memory', () => {
  const hub = memoryHub({ pollMs: 50 })
  return { open: () => memoryCoordination({ hub, leaseMs: 300 }), leaseMs: 300 }
})

describe('memory coordination on a manual clock', () => {
  it('answers rate takes exactly as the in-process token bucket, refill included', async () => {
    const clock = manualClock(1_000_000)
    const coord = memoryCoordination({ clock })
    const bucket = tokenBucket({ rpm: 60, burst: 10, clock })
    for (const step of [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 250, 999, 1001, 0, 0, 5000, 60_000, 0, 1]) {
      clock.advance(step)
      expect(await coord.rates.take('usr_1', { rpm: 60, burst: 10 })).toEqual(bucket.take('usr_1'))
    }
    await expect(coord.rates.take('usr_1', { rpm: 0, burst: 10 })).rejects.toThrow(/rpm > 0/)
  })

  it('lapses slot leases, single-use keys and a closed holder of a job by the clock, not before', async () => {
    const clock = manualClock(0)
    const hub = memoryHub({ clock })
    const a = memoryCoordination({ hub, leaseMs: 1000 })
    const b = memoryCoordination({ hub, leaseMs: 1000 })
    await a.slots.acquire('prof_1', 1, 'ws_1', 500)
    await a.once.claimOnce('state_1', 500)
    await a.queue('tasks').add({ id: 'task_1', owner: 'usr_1', payload: null })
    expect(await a.queue('tasks').take()).not.toBeNull()
    await a.close()
    clock.advance(499)
    expect(await b.slots.acquire('prof_1', 1, 'ws_2', 500)).toBeNull()
    expect(await b.once.claimOnce('state_1', 500)).toBe(false)
    clock.advance(1)
    expect(await b.slots.acquire('prof_1', 1, 'ws_2', 500)).not.toBeNull()
    expect(await b.once.claimOnce('state_1', 500)).toBe(true)
    clock.advance(499)
    expect(await b.queue('tasks').take()).toBeNull()
    clock.advance(1)
    expect(await b.queue('tasks').take()).toMatchObject({ id: 'task_1', deliveries: 2 })
    await b.close()
  })

  it('refuses a closed instance and a bad queue name', async () => {
    const coord = memoryCoordination()
    expect(() => coord.queue('a:b')).toThrow(/invalid queue name/)
    await coord.close()
    expect(() => coord.queue('tasks')).toThrow(/closed/)
  })
})
