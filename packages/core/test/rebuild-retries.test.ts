/**
 * Delivery retries across a flush of the coordination backend (a memory hub whose delayed
 * jobs and keys are cleared, as a flushed Redis loses them): the stored retry is scheduled
 * again by the rebuild and made once, however many instances rebuild; an attempt already
 * claimed before the flush is not made again.
 */
import { randomBytes } from 'node:crypto'
import { afterEach, expect, it, vi } from 'vitest'
import { memoryCoordination } from '../src/coordination/memory.js'
import { memoryHub, type MemoryHub } from '../src/coordination/memory-hub.js'
import { defineChannel } from '../src/ports/channel.js'
import { createAesGcmCipher } from '../src/ports/cipher.js'
import { createServices, type Services } from '../src/services.js'
import { countingStore } from './task-fakes.js'

const opened: Services[] = []
afterEach(async () => {
  for (const s of opened.splice(0)) {
    s.rebuild.close()
    await s.notifications.close()
    await s.coordination.close()
  }
})

function flush(hub: MemoryHub): void {
  hub.delayed.clear()
  hub.once.clear()
}

it('a retry lost with the backend is made once after the rebuild, and a claimed attempt is not made again', async () => {
  const hub = memoryHub({ pollMs: 20 })
  const store = countingStore()
  const cipher = createAesGcmCipher(randomBytes(32))
  const sent: { notification: string; attempt: number }[] = []
  let answer = 503
  const webhook = defineChannel(() => ({
    async deliver(_target, n) {
      sent.push({ notification: n.notification_id, attempt: n.attempt })
      return answer === 200
        ? { ok: true as const, status: 200 }
        : { ok: false as const, status: answer, error: 'unavailable', retryable: true }
    },
  }))({})
  const instance = (id: string) => {
    const coordination = memoryCoordination({ hub, instanceId: id })
    const s = createServices({
      store,
      cipher,
      coordination,
      channels: { webhook },
      notificationRetry: { attempts: 3, backoffMs: 300 },
    })
    opened.push(s)
    return s
  }
  const a = instance('A')
  const b = instance('B')
  await a.integrations.create('usr_1', { type: 'webhook', config: { url: 'https://hooks.example.com/berth' } })

  // Attempt 1 fails: attempt 2 is stored and waits as a delayed job, which a flush loses.
  await a.notifications.notify('usr_1', 'prof_1', 'task.completed', {})
  flush(hub)
  answer = 200
  await Promise.all([a.rebuild.run({ reset: true }), b.rebuild.run({ reset: true })])
  await vi.waitFor(() => expect(sent.map((s) => s.attempt)).toEqual([1, 2]), { timeout: 5_000 })
  expect(await store.keys('notification-retries:')).toEqual([])

  // An attempt an instance claimed (and died before finishing) stays claimed through a flush.
  answer = 503
  await b.notifications.notify('usr_1', 'prof_1', 'task.completed', {})
  const [key] = await store.keys('notification-retries:')
  const retry = (await store.get<{ notification: { notification_id: string }; integration_id: string }>(key!))!
  const jobId = `${retry.notification.notification_id}:${retry.integration_id}:2`
  expect(await a.once.claimOnce(`notification-attempt:${jobId}`, 3_600_000)).toBe(true)
  flush(hub)
  await Promise.all([a.rebuild.run({ reset: true }), b.rebuild.run({ reset: true })])
  // Its job ran (and was refused by the claim): the retry record is left, nothing was sent.
  await vi.waitFor(() => expect(hub.delayed.size).toBe(0), { timeout: 5_000 })
  await new Promise((r) => setTimeout(r, 100))
  expect(sent.filter((s) => s.notification === retry.notification.notification_id).map((s) => s.attempt)).toEqual([1])
})
