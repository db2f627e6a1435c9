/**
 * `GET /v1/workspaces/:id/transcript` over the real server while a real task on Podman is
 * still writing its events: pages never skip or repeat an event.
 */
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
    const sub = await t.submit({
      prompt: 'Work slowly. [[berth:slow 50]] [[berth:turns 4]] [[berth:text one two three four five six seven eight]]',
    })
    const taskId = sub.task_id
    const wsId = sub.workspace_id
    const transcript = (query: { after?: number; limit: number }) =>
      t.api.workspaces.transcript({ params: { id: wsId }, query })
    const seen: Awaited<ReturnType<typeof transcript>>['events'] = []
    let pagesWhileRunning = 0
    let grewWhileRunning = 0
    let lastTotal = 0
    for (let done = false; ; ) {
      const task = await t.api.tasks.get({ params: { id: taskId } })
      const finished = ['completed', 'failed', 'cancelled'].includes(task.status)
      const page = await transcript({ after: seen.at(-1)?.seq ?? 0, limit: 3 })
      seen.push(...page.events)
      if (!finished) {
        pagesWhileRunning++
        if (page.total > lastTotal && lastTotal > 0) grewWhileRunning++
      }
      lastTotal = page.total
      // Done once the task had ended before a page that came back short.
      if (done && page.events.length < 3) break
      done = finished
      // Real time is the point: pages are read while the task is still writing, not after.
      if (page.events.length < 3) await new Promise((r) => setTimeout(r, 20))
    }
    expect((await t.api.tasks.get({ params: { id: taskId } })).status).toBe('completed')
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
    const whole = await transcript({ limit: 100 })
    const rest = await transcript({ after: 100, limit: 100 })
    expect([...whole.events, ...rest.events]).toEqual(seen)
  }, 120_000)
})
