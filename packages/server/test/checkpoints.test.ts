/**
 * Checkpoints of sessions on Docker and Podman: a fork at task 2 of 3 and a rewind to it,
 * for a session whose files go with its container and for a persistent one (its volume made
 * anew with task 2's files).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ENGINES, sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'
import { forkAtSecond, rewindToSecond } from './checkpoints.helpers.js'

describe.each(ENGINES)('checkpoints of a session on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer(engine)
  })
  afterAll(async () => {
    await t.s.close()
    for (const v of await t.runtime.listVolumes({ labels: { 'berth.pool': t.pool } }))
      await t.runtime.removeVolume(v.name)
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it('a fork at task 2 of 3 has task 2’s files and memory, nothing of task 3; the original is untouched', async () => {
    await forkAtSecond(t)
  }, 300_000)

  it('a rewind to task 2 of 3 takes the session back: files, memory, later tasks marked', async () => {
    await rewindToSecond(t)
  }, 300_000)

  it('a persistent session rewinds onto a volume made anew with task 2’s files', async () => {
    const profile = await t.api.profiles.create({
      body: { name: 'Kept', slug: 'kept', api_key_id: t.keyId, default_tools: ['Bash'], persistent_sessions: true },
    })
    const { workspace } = await rewindToSecond(t, profile.id)
    const volumes = (await t.runtime.listVolumes({ labels: { 'berth.pool': t.pool } })).map((v) => v.name)
    expect(volumes).toContain(`berth-${workspace.replace('_', '-')}`)
    expect((await t.api.workspaces.get({ params: { id: workspace } })).persistent).toBe(true)
  }, 300_000)
})
