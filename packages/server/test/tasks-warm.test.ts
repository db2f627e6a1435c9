/**
 * Warm agents: a pooled container whose runner already started Claude Code for the
 * settings of a recent task serves the next task with exactly those settings, and never
 * a task whose settings (secrets, model) differ. The secrets are brokered: an agent is
 * never parked holding an `env` secret's value (see warm-default.test.ts).
 */
import type { PooledContainer } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { ENGINES, sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

describe.each(ENGINES)('warm agents on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer(engine, { min: 2, max: 8, warmAgents: 2 })
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  /** Containers holding a parked agent: in use, serving no workspace. */
  const parked = () =>
    (t.s.berth.pool!.list() as PooledContainer[])
      .filter((c) => c.state === 'in_use' && c.workspace_id === null)
      .map((c) => c.id)
  const echo = async (profileId: string) => {
    const task = await t.run({
      profile_id: profileId,
      prompt: 'Show it. [[berth:tool Bash {"command":"echo val=$MY_VAL"}]] [[berth:text shown]]',
    })
    expect(task.status, JSON.stringify(task.error)).toBe('completed')
    const out = (await t.events(task.task_id)).find((e) => e.type === 'tool_result')
    expect(out).toMatchObject({ output: expect.any(String) })
    return out!.output as string
  }

  /** A brokered secret: its variable holds a placeholder naming it (the value stays with the proxy). */
  const brokered = (value: string) =>
    t.api.secrets.create({ body: { name: 'MY_VAL', value, delivery: 'brokered', hosts: ['api.example.test'] } })

  it('serves the next task with the same settings, and none whose secrets or model differ', async () => {
    const one = await brokered('one')
    // Cold, and it leaves an agent started with its settings.
    expect(await echo(t.profileId)).toContain(`val=berth_brokered_${one.id}`)
    const [first] = await vi.waitFor(() => {
      const p = parked()
      if (p.length !== 1) throw new Error(`parked: ${p.length}`)
      return p
    }, 60_000)

    // The secret changed: the parked agent (started with the first) must not serve this task.
    await t.api.secrets.delete({ params: { id: one.id } })
    const two = await brokered('two')
    expect(await echo(t.profileId)).toContain(`val=berth_brokered_${two.id}`)
    expect(parked()).toContain(first)
    const second = await vi.waitFor(() => {
      const p = parked().filter((id) => id !== first)
      if (p.length !== 1) throw new Error(`parked: ${parked().length}`)
      return p[0]!
    }, 60_000)

    // Same settings as the last task: its agent serves this one (and is used up).
    expect(await echo(t.profileId)).toContain(`val=berth_brokered_${two.id}`)
    expect(parked()).not.toContain(second)
    expect(parked()).toContain(first)

    // Another model: cold again, the agents started for the other settings stay parked.
    const other = await t.api.profiles.create({
      body: { name: 'Other', slug: 'other', api_key_id: t.keyId, default_tools: ['Bash'], model: 'claude-haiku-4-5' },
    })
    const before = parked()
    expect(await echo(other.id)).toContain(`val=berth_brokered_${two.id}`)
    for (const id of before) expect(parked()).toContain(id)
  }, 180_000)

  it("a session whose first task takes a parked agent holds a session's container: a preview of it can be made", async () => {
    const say = async (mode: 'batch' | 'session') => {
      const task = await t.run({ mode, prompt: 'Say it. [[berth:text ok]]' })
      expect(task.status, JSON.stringify(task.error)).toBe('completed')
      return task
    }
    const before = new Set(parked())
    await say('batch')
    // The agent started for the next task like that one.
    const fresh = await vi.waitFor(() => {
      const p = parked().filter((id) => !before.has(id))
      if (!p.length) throw new Error('no agent parked yet')
      return p
    }, 60_000)
    const session = await say('session')
    const ws = await t.api.workspaces.get({ params: { id: session.workspace_id! } })
    expect(fresh).toContain(ws.container_id)
    const preview = await t.api.workspaces.previews.create({ params: { id: ws.id }, body: { port: 8000 } })
    expect(preview.port).toBe(8000)
    const held = (t.s.berth.pool!.list() as PooledContainer[]).find((c) => c.id === ws.container_id)
    expect(held).toMatchObject({ purpose: 'session', workspace_id: ws.id })
  }, 180_000)
})
