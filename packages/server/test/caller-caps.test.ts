/**
 * Per-caller caps end to end on Docker (issue 29): the operator caps one caller at one
 * running workspace through `PUT /admin/users/:id/limits`; that caller's second task waits
 * in the queue (its view says why) while another caller's task runs to its end, and starts
 * once the first gave its container back. Bad caps are 400; the route shows what holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, clientFor, failure } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { agentUser, taskServer } from './tasks.helpers.js'

const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]]`

describe('per-caller caps on docker', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer('docker', { min: 0, max: 6, berth: { callerCaps: { poolShare: 0.5 } } })
  }, 120_000)
  afterAll(async () => {
    await t?.s.close()
    if (t) await sweep(t.runtime, t.pool)
  })

  it("a caller at its cap waits while another caller's task runs; it starts once its first task ended", async () => {
    const admin = clientFor(t.s, ADMIN_TOKEN)
    const capped = await agentUser(t.s)
    const other = await agentUser(t.s)
    const set = await admin.admin.limits.set({ params: { id: capped.id }, body: { max_running: 1 } })
    expect(set).toMatchObject({ max_running: 1, pool_share: null, effective_max_running: 1 })
    // Half of the pool of 6 for everyone else.
    expect(await admin.admin.limits.get({ params: { id: other.id } })).toMatchObject({ effective_max_running: 3 })

    // The first holds the caller's one workspace until it is cancelled.
    const first = await capped.submit({ prompt: `Hold on. ${bash('echo holding; sleep 120')} [[berth:text One.]]` })
    const second = await capped.submit({ prompt: 'Me too. [[berth:text Two.]]' })
    let waiting = await capped.api.tasks.get({ params: { id: second.task_id } })
    for (let i = 0; i < 600 && waiting.waiting?.reason !== 'caller_cap'; i++) {
      await new Promise((r) => setTimeout(r, 50))
      waiting = await capped.api.tasks.get({ params: { id: second.task_id } })
    }
    expect(waiting.status).toBe('queued')
    expect(waiting.waiting?.message).toContain('max_running 1')
    // Another caller is not held back by it: its task runs to its end while the capped one still waits.
    const theirs = await other.run({ prompt: 'Quick. [[berth:text Done.]]' })
    expect(theirs.status).toBe('completed')
    const firstNow = await capped.api.tasks.get({ params: { id: first.task_id } })
    expect(
      (await capped.api.tasks.get({ params: { id: second.task_id } })).status,
      JSON.stringify({ status: firstNow.status, error: firstNow.error }),
    ).toBe('queued')
    expect(['starting', 'running']).toContain((await capped.api.tasks.get({ params: { id: first.task_id } })).status)
    // The first gives its workspace back: the second starts and completes.
    expect((await capped.api.tasks.cancel({ params: { id: first.task_id } })).status).toBe('cancelled')
    const two = await capped.waitDone(second.task_id)
    expect(two.status).toBe('completed')
    expect(two.waiting).toBeNull()
  }, 180_000)

  it('refuses caps that cannot be right and clears them with null', async () => {
    const admin = clientFor(t.s, ADMIN_TOKEN)
    const u = await agentUser(t.s)
    for (const body of [{ pool_share: 1.5 }, { pool_share: 0 }, { max_running: 0 }, { max_running: 1.5 }]) {
      const err = await failure(admin.admin.limits.set({ params: { id: u.id }, body }))
      expect(err.status).toBe(400)
      expect(JSON.stringify(err.details)).toContain(Object.keys(body)[0]!)
    }
    await admin.admin.limits.set({ params: { id: u.id }, body: { pool_share: 0.2 } })
    expect(await admin.admin.limits.get({ params: { id: u.id } })).toMatchObject({
      pool_share: 0.2,
      effective_max_running: 1,
    })
    await admin.admin.limits.set({ params: { id: u.id }, body: { pool_share: null } })
    expect(await admin.admin.limits.get({ params: { id: u.id } })).toMatchObject({
      pool_share: null,
      effective_max_running: 3,
    })
  }, 60_000)
})
