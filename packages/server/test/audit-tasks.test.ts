/**
 * Tasks after the audit, for real on Podman with the offline model: playbook runs wait in
 * the queue for a concurrency slot (an idle session yields its slot), model rules hold at
 * run time, the submit answer names the session, a 429 CONCURRENCY_LIMIT says when to
 * retry, and an event page's `total` is counted rather than read from the whole log.
 */
import type { Task } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { sweep } from './pool.helpers.js'
import { taskServer, type Json } from './tasks.helpers.js'

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
async function profile(slug: string, extra: Json = {}): Promise<string> {
  const res = await t.call('POST', '/v1/profiles', { name: slug, slug, api_key_id: t.keyId, default_tools: ['Bash'], ...extra })
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.id
}

describe('submit answer', () => {
  it('a new session’s submit carries its session_id and workspace_id; a batch’s session_id is null', async () => {
    const p = await profile('answer')
    const session = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: p, prompt: 'Hi.' })
    expect(session.status).toBe(202)
    expect(session.body).toMatchObject({ task_id: expect.stringMatching(/^task_/), status: 'queued', session_id: expect.stringMatching(/^sess_/), workspace_id: expect.stringMatching(/^ws_/) })
    const done = await t.waitDone(session.body.task_id)
    expect(done.session_id).toBe(session.body.session_id)
    expect(done.workspace_id).toBe(session.body.workspace_id)
    // A follow-up with that session id, straight from the answer, runs in the same workspace.
    const next = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: p, session_id: session.body.session_id, prompt: 'Again.' })
    expect(next.body.workspace_id).toBe(session.body.workspace_id)
    await t.waitDone(next.body.task_id)
    await t.call('DELETE', `/v1/workspaces/${session.body.workspace_id}`)
    const batch = await t.call('POST', '/v1/tasks', { mode: 'batch', profile_id: p, prompt: 'Batch.' })
    expect(batch.body.session_id).toBeNull()
    await t.waitDone(batch.body.task_id)
  })
})

describe('concurrency', () => {
  it('a playbook run at the profile’s limit waits for the slot instead of failing; a plain submit gets 429 with Retry-After', async () => {
    const p = await profile('limited')
    // A session holds the profile's only slot while its container stays warm.
    const session = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: p, prompt: 'Hold the slot.' })
    await t.waitDone(session.body.task_id)
    const refused = await t.s.request('/v1/tasks', { method: 'POST', token: t.token, json: { mode: 'batch', profile_id: p, prompt: 'No room.' } })
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(((await refused.json()) as Json).code).toBe('CONCURRENCY_LIMIT')

    const pb = (await t.call('POST', '/v1/playbooks', { profile_id: p, name: 'Queued', prompt: 'Run when there is room. [[berth:text Ran.]]' })).body
    const [a, b] = [await t.call('POST', `/v1/playbooks/${pb.id}/run`), await t.call('POST', `/v1/playbooks/${pb.id}/run`)]
    expect([a.status, b.status]).toEqual([202, 202])
    const runs = await vi.waitFor(async () => {
      const list = (await t.call('GET', `/v1/playbooks/${pb.id}/runs`)).body.runs as Json[]
      expect(list.filter((r) => ['completed', 'failed', 'cancelled'].includes(r.status))).toHaveLength(2)
      return list
    }, 90_000)
    // Both ran, one after the other, none refused for the limit.
    expect(runs.map((r) => [r.status, r.error])).toEqual([
      ['completed', null],
      ['completed', null],
    ])
    // The idle session gave its slot up (its conversation kept) and can be continued.
    expect((await t.call('GET', `/v1/workspaces/${session.body.workspace_id}`)).body.status).toBe('idle')
    // (The last run's pb- session gives the slot back right after its run ends.)
    const follow = await vi.waitFor(async () => {
      const res = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: p, session_id: session.body.session_id, prompt: 'Back.' })
      expect(res.status).toBe(202)
      return res
    }, 15_000)
    expect((await t.waitDone(follow.body.task_id)).status).toBe('completed')
    await t.call('DELETE', `/v1/workspaces/${session.body.workspace_id}`)
  }, 150_000)
})

describe('model rules at run time', () => {
  it('an agent whose model the credential does not allow fails the task with MODEL_ERROR', async () => {
    const key = (await t.call('POST', '/v1/api-keys', { name: 'haiku only', provider: 'stub', allowed_models: ['claude-haiku-*'] })).body
    const p = await profile('agents', { api_key_id: key.id })
    const agent = await t.call('POST', '/v1/agents', { name: 'big-thinker', prompt: 'Think hard.', model: 'claude-opus-4-5', profile_ids: [p] })
    expect(agent.status).toBe(201)
    const sub = await t.call('POST', '/v1/tasks', { mode: 'batch', profile_id: p, prompt: 'Go.' })
    const done = (await t.waitDone(sub.body.task_id)) as Task
    expect(done.status).toBe('failed')
    expect(done.error).toMatchObject({ code: 'MODEL_ERROR', error: expect.stringContaining('big-thinker') })
    await t.call('DELETE', `/v1/agents/${agent.body.id}`)
  })

  it('a workspace override the credential no longer allows fails the task with MODEL_ERROR, never runs another model', async () => {
    const key = (await t.call('POST', '/v1/api-keys', { name: 'narrowing', provider: 'stub' })).body
    const p = await profile('override', { api_key_id: key.id })
    const first = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: p, prompt: 'First.' })
    await t.waitDone(first.body.task_id)
    const ws = first.body.workspace_id as string
    expect((await t.call('PATCH', `/v1/workspaces/${ws}`, { model_override: 'claude-opus-4-5' })).status).toBe(200)
    // The profile names no model, so narrowing the credential is allowed; the override is now outside it.
    expect((await t.call('PATCH', `/v1/api-keys/${key.id}`, { allowed_models: ['claude-haiku-*'] })).status).toBe(200)
    const next = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: p, session_id: first.body.session_id, prompt: 'Second.' })
    const done = (await t.waitDone(next.body.task_id)) as Task
    expect(done.status).toBe('failed')
    expect(done.error).toMatchObject({ code: 'MODEL_ERROR', error: expect.stringContaining('claude-opus-4-5') })
    await t.call('DELETE', `/v1/workspaces/${ws}`)
  })
})

describe('task events', () => {
  it('total is counted as events are recorded: a page never reads the rest of the log', async () => {
    const p = await profile('events')
    const first = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: p, prompt: 'One. [[berth:tool Bash {"command":"echo one"}]]' })
    await t.waitDone(first.body.task_id)
    const second = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: p, session_id: first.body.session_id, prompt: 'Two. [[berth:tool Bash {"command":"echo two"}]]' })
    await t.waitDone(second.body.task_id)
    const all = (await t.call('GET', `/v1/tasks/${second.body.task_id}/events?limit=100`)).body
    expect(all.total).toBe(all.events.length)
    expect(all.events.every((e: Json) => e.task_id === second.body.task_id)).toBe(true)

    const log = t.s.berth.services.eventLog
    const reads: { after: number; limit: number }[] = []
    const read = log.read.bind(log)
    log.read = (owner, ws, opts) => {
      reads.push({ after: opts.after, limit: opts.limit })
      return read(owner, ws, opts)
    }
    try {
      const page = (await t.call('GET', `/v1/tasks/${second.body.task_id}/events?limit=2`)).body
      expect(page.total).toBe(all.total)
      expect(page.events).toEqual(all.events.slice(0, 2))
      // One read, bounded by the page, starting at the task's first event (not the workspace's).
      expect(reads).toEqual([{ after: all.events[0].seq - 1, limit: 2 }])
    } finally {
      log.read = read
    }
    await t.call('DELETE', `/v1/workspaces/${first.body.workspace_id}`)
  })
})
