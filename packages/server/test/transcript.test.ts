/**
 * `GET /v1/workspaces/:id/transcript` over the real server while a real task on Podman is
 * still writing its events: pages never skip or repeat an event.
 */
import type { TranscriptEvent } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

let t: Awaited<ReturnType<typeof taskServer>>
beforeAll(async () => {
  t = await taskServer('podman')
})
afterAll(async () => {
  await t.s.close()
  await sweep(t.runtime, t.pool)
})

describe('transcript paging', () => {
  it('has no gap and no duplicate across pages while events are still arriving', async () => {
    const sub = await t.call('POST', '/v1/tasks', {
      mode: 'batch',
      profile_id: t.profileId,
      prompt: 'Work slowly. [[berth:slow 50]] [[berth:turns 4]] [[berth:text one two three four five six seven eight]]',
    })
    expect(sub.status).toBe(202)
    const taskId = sub.body.task_id as string
    let wsId: string | null = null
    const seen: TranscriptEvent[] = []
    let pagesWhileRunning = 0
    let grewWhileRunning = 0
    let lastTotal = 0
    for (let done = false; ; ) {
      const task = (await t.call('GET', `/v1/tasks/${taskId}`)).body
      wsId ??= task.workspace_id
      const finished = ['completed', 'failed', 'cancelled'].includes(task.status)
      const page = await t.call('GET', `/v1/workspaces/${wsId}/transcript?after=${seen.at(-1)?.seq ?? 0}&limit=3`)
      expect(page.status).toBe(200)
      seen.push(...(page.body.events as TranscriptEvent[]))
      if (!finished) {
        pagesWhileRunning++
        if (page.body.total > lastTotal && lastTotal > 0) grewWhileRunning++
      }
      lastTotal = page.body.total
      // Done once the task had ended before a page that came back short.
      if (done && page.body.events.length < 3) break
      done = finished
      if (page.body.events.length < 3) await new Promise((r) => setTimeout(r, 20))
    }
    expect((await t.call('GET', `/v1/tasks/${taskId}`)).body.status).toBe('completed')
    // Pages were read while the task kept adding events.
    expect(pagesWhileRunning).toBeGreaterThan(5)
    expect(grewWhileRunning).toBeGreaterThan(2)
    const seqs = seen.map((e) => e.seq)
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1))
    expect(seqs.length).toBe(lastTotal)
    expect(seen.filter((e) => e.type === 'turn_start').length).toBeGreaterThanOrEqual(5)
    expect(seen.filter((e) => e.type === 'token').length).toBeGreaterThan(10)
    expect(seen.at(-1)!.type).toBe('result')

    // The same log read afterwards in large pages is exactly what the small pages gave.
    const whole = await t.call('GET', `/v1/workspaces/${wsId}/transcript?limit=100`)
    const rest = await t.call('GET', `/v1/workspaces/${wsId}/transcript?after=100&limit=100`)
    expect([...whole.body.events, ...rest.body.events]).toEqual(seen)
  }, 120_000)
})
