/** Per-profile concurrency counted over instances: ConcurrencySlots backed by the coordination's slots. */
import { describe, expect, it } from 'vitest'
import { memoryCoordination } from '../src/coordination/memory.js'
import { memoryHub } from '../src/coordination/memory-hub.js'
import { isApiError } from '@berth/contract'
import { ConcurrencySlots } from '../src/limits/concurrency.js'
import { manualClock } from '../src/ports/clock.js'

/** Three instances' slots on one hub, limit 5. */
function three(ttlMs = 60_000) {
  const clock = manualClock(0)
  const hub = memoryHub({ clock })
  const coords = [0, 1, 2].map((i) => memoryCoordination({ hub, instanceId: `i${i}` }))
  return { clock, coords, slots: coords.map((c) => new ConcurrencySlots(5, { slots: c.slots, ttlMs })) }
}

describe('ConcurrencySlots over instances', () => {
  it('admits exactly the limit of parallel takes spread over instances, with today’s 429', async () => {
    const { slots } = three()
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => slots[i % 3]!.take('prof_1', `ws_${i}`)),
    )
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5)
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []))
    expect(refused).toHaveLength(15)
    for (const err of refused) {
      expect(isApiError(err) && err.code).toBe('CONCURRENCY_LIMIT')
      expect(err.details).toEqual({ limit: 5, running: 5, retry_after: 10 })
      expect(err.headers).toEqual({ 'retry-after': '10' })
    }
    // Every instance's view shows the five, wherever they were taken.
    await slots[1]!.take('prof_1', 'ws_0').catch(() => {})
    expect((await slots[1]!.sharedSnapshot())[0]?.holders).toHaveLength(5)
    for (const s of slots) s.close()
  })

  it('a holder keeps its slot when it takes again, and a release anywhere frees it for all', async () => {
    const { slots } = three()
    for (let i = 0; i < 5; i++) await slots[0]!.take('prof_1', `ws_${i}`)
    await slots[1]!.take('prof_1', 'ws_3') // a follow-up of ws_3 submitted elsewhere
    await expect(slots[2]!.take('prof_1', 'ws_9')).rejects.toMatchObject({ code: 'CONCURRENCY_LIMIT' })
    slots[1]!.release('prof_1', 'ws_3')
    await expect(slots[2]!.take('prof_1', 'ws_9')).resolves.toBeUndefined()
    for (const s of slots) s.close()
  })

  it('an instance that stops renewing (died) stops counting after the ttl', async () => {
    const { clock, slots } = three(1_000)
    for (let i = 0; i < 5; i++) await slots[0]!.take('prof_1', `ws_${i}`)
    slots[0]!.close()
    await expect(slots[1]!.take('prof_1', 'ws_9')).rejects.toMatchObject({ code: 'CONCURRENCY_LIMIT' })
    clock.advance(1_001)
    await expect(slots[1]!.take('prof_1', 'ws_9')).resolves.toBeUndefined()
    for (const s of slots) s.close()
  })
})
