/**
 * Forking a session on Docker and Podman: from a warm container, after the idle release,
 * and on a persistent volume; the original never changes; the refusals (404, 409, 400).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { failure } from './helpers.js'
import { ENGINES, sweep } from './pool.helpers.js'
import { agentUser, taskServer } from './tasks.helpers.js'
import { fileNames, forkAfterSecondTask, waitIdle } from './workspace-fork.helpers.js'

describe.each(ENGINES)('forking a session on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let idle: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer(engine)
    // Releases a session's container 300 ms after its prompt.
    idle = await taskServer(engine, { min: 0, sessionIdleMs: 300 })
  })
  afterAll(async () => {
    await t.s.close()
    await idle.s.close()
    for (const x of [t, idle]) {
      for (const v of await x.runtime.listVolumes({ labels: { 'berth.pool': x.pool } }))
        await x.runtime.removeVolume(v.name)
      expect(await sweep(x.runtime, x.pool)).toBe(0)
    }
  })

  it('a fork of a warm session after task 2 has tasks 1–2’s files and memory, not task 3’s; the original is unchanged', async () => {
    const { original, fork, t2, latest } = await forkAfterSecondTask(t, {
      beforeFork: async (ws) => expect((await t.api.workspaces.get({ params: { id: ws } })).status).toBe('running'),
    })
    // At an earlier task too, from its checkpoint (checkpoints.test.ts looks into it).
    const early = await t.api.workspaces.fork({ params: { id: original }, body: { at_task_id: t2.task_id } })
    expect(early.forked_from).toEqual({ workspace_id: original, task_id: t2.task_id })
    const again = await t.api.workspaces.fork({ params: { id: original }, body: { at_task_id: latest.task_id } })
    expect(again.forked_from).toEqual({ workspace_id: original, task_id: latest.task_id })
    // A task of another workspace (the fork's own) is a 400.
    expect(
      await failure(t.api.workspaces.fork({ params: { id: fork.id }, body: { at_task_id: latest.task_id } })),
    ).toMatchObject({ status: 400 })
  }, 300_000)

  it('a fork of a session whose container was released idle has its files and conversation', async () => {
    const user = await agentUser(idle.s)
    await forkAfterSecondTask(user, {
      beforeFork: (ws) => waitIdle(user.api, ws),
      originalKeepsFiles: false,
    })
  }, 300_000)

  it('a fork of a persistent session gets its own volume with a copy of the files', async () => {
    const profile = await t.api.profiles.create({
      body: { name: 'Kept', slug: 'kept', api_key_id: t.keyId, default_tools: ['Bash'], persistent_sessions: true },
    })
    const { original, fork } = await forkAfterSecondTask(t, { profileId: profile.id })
    const forkView = await t.api.workspaces.get({ params: { id: fork.id } })
    expect(forkView.persistent).toBe(true)
    const volumes = (await t.runtime.listVolumes({ labels: { 'berth.pool': t.pool } })).map((v) => v.name)
    expect(volumes).toEqual(expect.arrayContaining([original, fork.id].map((id) => `berth-${id.replace('_', '-')}`)))
    // Released, the fork's files stay on its volume.
    await t.s.berth.services.tasks.containers.release(t.id, fork.id)
    expect(await fileNames(t.api, fork.id)).toEqual(expect.arrayContaining(['one.txt', 'two.txt', 'four.txt']))
  }, 300_000)

  it('refuses another caller’s workspace or task (404), a running task (409) and a batch workspace (400)', async () => {
    const first = await t.run({ mode: 'session', prompt: 'Start. [[berth:text ok]]' })
    const ws = first.workspace_id!
    const other = await agentUser(t.s)
    expect(await failure(other.api.workspaces.fork({ params: { id: ws }, body: {} }))).toMatchObject({
      status: 404,
      code: 'NOT_FOUND',
    })
    const theirs = await other.run({ mode: 'session', prompt: 'Mine. [[berth:text ok]]' })
    expect(
      await failure(t.api.workspaces.fork({ params: { id: ws }, body: { at_task_id: theirs.task_id } })),
    ).toMatchObject({ status: 404, code: 'NOT_FOUND' })
    expect(
      await failure(t.api.workspaces.fork({ params: { id: ws }, body: { at_task_id: 'not-a-task' } as never })),
    ).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' })

    const slow = await t.submit({
      mode: 'session',
      session_id: first.session_id!,
      prompt: 'Take your time. [[berth:slow 50]] [[berth:text done slowly]]',
    })
    const busy = await failure(t.api.workspaces.fork({ params: { id: ws }, body: {} }))
    expect(busy).toMatchObject({ status: 409, code: 'CONFLICT', details: { task_id: slow.task_id } })
    expect(
      await failure(t.api.workspaces.fork({ params: { id: ws }, body: { at_task_id: slow.task_id } })),
    ).toMatchObject({ status: 409 })
    expect((await t.waitDone(slow.task_id)).status).toBe('completed')
    // No body at all is the default fork (at the latest finished task), as `{}` is.
    const bare = await t.s.request(`/v1/workspaces/${ws}/fork`, { method: 'POST', token: t.token })
    expect(bare.status).toBe(201)
    expect(((await bare.json()) as { forked_from: unknown }).forked_from).toEqual({
      workspace_id: ws,
      task_id: slow.task_id,
    })

    const batch = await t.run({ prompt: 'Once. [[berth:text ok]]' })
    const refused = await failure(t.api.workspaces.fork({ params: { id: batch.workspace_id! }, body: {} }))
    expect(refused).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' })
    expect(refused.message).toContain('batch')
  }, 120_000)
})
