/**
 * Tasks after the audit, for real on Podman with the offline model: playbook runs wait in
 * the queue for a concurrency slot (an idle session yields its slot), model rules hold at
 * run time, the submit answer names the session, a 429 CONCURRENCY_LIMIT says when the
 * running task ends at the latest, and an event page's `total` is counted rather than read from the whole log.
 */
import type { RouteInput } from '@berth/client'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { failure, waitForTask } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

let t: Awaited<ReturnType<typeof taskServer>>
beforeAll(async () => {
  // One running workspace per profile; the idle timer long enough to never fire here.
  t = await taskServer('podman', { concurrency: 1, max: 6, sessionIdleMs: 10 * 60_000 })
})
afterAll(async () => {
  await t.s.close()
  expect(await sweep(t.runtime, t.pool)).toBe(0)
})

/** A profile of its own (the concurrency limit is per profile). */
async function profile(slug: string, extra: Partial<RouteInput<'profiles.create'>['body']> = {}): Promise<string> {
  return (
    await t.api.profiles.create({ body: { name: slug, slug, api_key_id: t.keyId, default_tools: ['Bash'], ...extra } })
  ).id
}
const removeWorkspace = (id: string) => t.api.workspaces.delete({ params: { id } })

describe('submit answer', () => {
  it('a new session’s submit carries its session_id and workspace_id; a batch’s session_id is null', async () => {
    const p = await profile('answer')
    const session = await t.submit({ mode: 'session', profile_id: p, prompt: 'Hi.' })
    expect(session).toMatchObject({
      task_id: expect.stringMatching(/^task_/),
      status: 'queued',
      session_id: expect.stringMatching(/^sess_/),
      workspace_id: expect.stringMatching(/^ws_/),
    })
    const done = await t.waitDone(session.task_id)
    expect(done.session_id).toBe(session.session_id)
    expect(done.workspace_id).toBe(session.workspace_id)
    // A follow-up with that session id, straight from the answer, runs in the same workspace.
    const next = await t.submit({ mode: 'session', profile_id: p, session_id: session.session_id!, prompt: 'Again.' })
    expect(next.workspace_id).toBe(session.workspace_id)
    await t.waitDone(next.task_id)
    await removeWorkspace(session.workspace_id)
    const batch = await t.submit({ profile_id: p, prompt: 'Batch.' })
    expect(batch.session_id).toBeNull()
    await t.waitDone(batch.task_id)
  })
})

describe('concurrency', () => {
  it('a playbook run at the profile’s limit waits for the slot instead of failing; a plain submit gets 429 with Retry-After', async () => {
    const p = await profile('limited')
    // A session's task running holds the profile's only slot (an idle session would yield it).
    const session = await t.submit({
      mode: 'session',
      profile_id: p,
      max_duration_s: 600,
      prompt: 'Hold the slot. [[berth:tool Bash {"command":"sleep 300"}]]',
    })
    await waitForTask(t.api, session.task_id, { until: (x) => x.status === 'running', timeout: 60_000 })
    const refused = await failure(t.submit({ profile_id: p, prompt: 'No room.' }))
    expect(refused.status).toBe(429)
    // The running task ends by its 600 s limit and the 15 s grace at the latest (the test server's clock stands still).
    expect(refused.headers?.get('retry-after')).toBe('615')
    expect(refused.code).toBe('CONCURRENCY_LIMIT')

    const pb = await t.api.playbooks.create({
      body: { profile_id: p, name: 'Queued', prompt: 'Run when there is room. [[berth:text Ran.]]' },
    })
    const [a, b] = [
      await t.api.playbooks.run({ params: { id: pb.id } }),
      await t.api.playbooks.run({ params: { id: pb.id } }),
    ]
    expect([a.status, b.status]).toEqual(['started', 'started'])
    // The session's task is cancelled: the session stays warm, idle, and yields its slot to the runs.
    await t.api.tasks.cancel({ params: { id: session.task_id } })
    const runs = await vi.waitFor(async () => {
      const list = (await t.api.playbooks.runs({ params: { id: pb.id } })).runs
      expect(list.filter((r) => ['completed', 'failed', 'cancelled'].includes(r.status))).toHaveLength(2)
      return list
    }, 90_000)
    // Both ran, one after the other, none refused for the limit.
    expect(runs.map((r) => [r.status, r.error])).toEqual([
      ['completed', null],
      ['completed', null],
    ])
    // The idle session gave its slot up (its conversation kept) and can be continued.
    expect((await t.api.workspaces.get({ params: { id: session.workspace_id } })).status).toBe('idle')
    // (The last run's pb- session gives the slot back right after its run ends.)
    const follow = await vi.waitFor(
      () => t.submit({ mode: 'session', profile_id: p, session_id: session.session_id!, prompt: 'Back.' }),
      15_000,
    )
    expect((await t.waitDone(follow.task_id)).status).toBe('completed')
    await removeWorkspace(session.workspace_id)
  }, 150_000)
})

describe('model rules at run time', () => {
  it('an agent whose model the credential no longer allows fails the task with MODEL_ERROR', async () => {
    const key = await t.api.apiKeys.create({ body: { name: 'narrowed', provider: 'stub' } })
    const p = await profile('agents', { api_key_id: key.id })
    const agent = await t.api.agents.create({
      body: { name: 'big-thinker', prompt: 'Think hard.', model: 'claude-opus-4-5', profile_ids: [p] },
    })
    // Saving the agent checked its model; narrowing the credential afterwards is caught when a task starts.
    await t.api.apiKeys.update({ params: { id: key.id }, body: { allowed_models: ['claude-haiku-*'] } })
    const done = await t.run({ profile_id: p, prompt: 'Go.' })
    expect(done.status).toBe('failed')
    expect(done.error).toMatchObject({ code: 'MODEL_ERROR', error: expect.stringContaining('big-thinker') })
    await t.api.agents.delete({ params: { id: agent.id } })
  })

  it('a workspace override the credential no longer allows fails the task with MODEL_ERROR, never runs another model', async () => {
    const key = await t.api.apiKeys.create({ body: { name: 'narrowing', provider: 'stub' } })
    const p = await profile('override', { api_key_id: key.id })
    const first = await t.submit({ mode: 'session', profile_id: p, prompt: 'First.' })
    await t.waitDone(first.task_id)
    const ws = first.workspace_id
    expect(
      (await t.api.workspaces.update({ params: { id: ws }, body: { model_override: 'claude-opus-4-5' } }))
        .model_override,
    ).toBe('claude-opus-4-5')
    // The profile names no model, so narrowing the credential is allowed; the override is now outside it.
    await t.api.apiKeys.update({ params: { id: key.id }, body: { allowed_models: ['claude-haiku-*'] } })
    const done = await t.run({ mode: 'session', profile_id: p, session_id: first.session_id!, prompt: 'Second.' })
    expect(done.status).toBe('failed')
    expect(done.error).toMatchObject({ code: 'MODEL_ERROR', error: expect.stringContaining('claude-opus-4-5') })
    await removeWorkspace(ws)
  })
})

describe('task events', () => {
  it('total is counted as events are recorded: a page never reads the rest of the log', async () => {
    const p = await profile('events')
    const first = await t.submit({
      mode: 'session',
      profile_id: p,
      prompt: 'One. [[berth:tool Bash {"command":"echo one"}]]',
    })
    await t.waitDone(first.task_id)
    const second = await t.submit({
      mode: 'session',
      profile_id: p,
      session_id: first.session_id!,
      prompt: 'Two. [[berth:tool Bash {"command":"echo two"}]]',
    })
    await t.waitDone(second.task_id)
    const events = (query: { limit: number }) => t.api.tasks.events({ params: { id: second.task_id }, query })
    const all = await events({ limit: 100 })
    expect(all.total).toBe(all.events.length)
    expect(all.events.every((e) => e.task_id === second.task_id)).toBe(true)

    const log = t.s.berth.services.eventLog
    const reads: { after: number; limit: number }[] = []
    const read = log.read.bind(log)
    log.read = (owner, ws, opts) => {
      reads.push({ after: opts.after, limit: opts.limit })
      return read(owner, ws, opts)
    }
    try {
      const page = await events({ limit: 2 })
      expect(page.total).toBe(all.total)
      expect(page.events).toEqual(all.events.slice(0, 2))
      // One read, bounded by the page, starting at the task's first event (not the workspace's).
      expect(reads).toEqual([{ after: all.events[0]!.seq - 1, limit: 2 }])
    } finally {
      log.read = read
    }
    await removeWorkspace(first.workspace_id)
  })
})
