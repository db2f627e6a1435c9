/**
 * Playbooks: stored prompts that run as tasks in `pb-` session workspaces, on demand or
 * by their webhook. Runs execute for real (Podman, the runner, the offline model); the
 * webhook's refusals, rate limit and constant-time path are checked on a server without an engine.
 */
import type { Task, TranscriptEvent } from '@berth/core'
import { timingSafeEqual } from 'node:crypto'
import { createStorage } from 'unstorage'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { startServer, type TestServer } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { taskServer, type Json } from './tasks.helpers.js'

// The secret comparisons the services make, observed (they still compare for real).
vi.mock('node:crypto', async (original) => {
  const crypto = await original<typeof import('node:crypto')>()
  return { ...crypto, timingSafeEqual: vi.fn(crypto.timingSafeEqual) }
})
const compares = vi.mocked(timingSafeEqual)

type Run = { id: string; status: string; trigger: string; task_id: string | null; workspace_id: string | null; session_id: string | null; error: { code: string; error: string } | null }
const DONE = ['completed', 'failed', 'cancelled']

describe('playbooks on podman', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer('podman')
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  /** Poll a playbook's runs until `count` of them have ended. */
  const finishedRuns = (pbId: string, count: number) =>
    vi.waitFor(async () => {
      const { body } = await t.call('GET', `/v1/playbooks/${pbId}/runs?limit=100`)
      const runs = body.runs as Run[]
      expect(runs.filter((r) => DONE.includes(r.status))).toHaveLength(count)
      return runs
    }, 90_000)

  it('is created on one of your profiles, listed per profile, updated and deleted with its runs', async () => {
    const other = await t.s.user('Mallory')
    const otherKey = await t.s.request('/v1/api-keys', { method: 'POST', token: other.token, json: { name: 'k', provider: 'stub' } })
    const otherProfile = await t.s.request('/v1/profiles', { method: 'POST', token: other.token, json: { name: 'M', slug: 'm', api_key_id: ((await otherKey.json()) as Json).id } })
    const foreign = ((await otherProfile.json()) as Json).id as string

    const refused = await t.call('POST', '/v1/playbooks', { profile_id: foreign, name: 'Steal', prompt: 'x' })
    expect(refused.status).toBe(400)
    expect(refused.body).toMatchObject({ code: 'VALIDATION_FAILED', details: { issues: [expect.objectContaining({ path: 'profile_id' })] } })

    const created = await t.call('POST', '/v1/playbooks', { profile_id: t.profileId, name: 'Digest', prompt: 'Write the digest.', max_turns: 3, allowed_tools: ['Bash'] })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ profile_id: t.profileId, name: 'Digest', trigger_type: 'manual', max_turns: 3, max_budget_usd: null, allowed_tools: ['Bash'], has_webhook_secret: false, webhook_path: null })
    expect(created.body.id).toMatch(/^pb_/)
    expect(created.body).not.toHaveProperty('webhook_secret')
    const id = created.body.id as string

    const second = await t.call('POST', '/v1/playbooks', { profile_id: t.profileId, name: 'Second', prompt: 'Another.' })
    const page1 = await t.call('GET', `/v1/profiles/${t.profileId}/playbooks?limit=1`)
    const page2 = await t.call('GET', `/v1/profiles/${t.profileId}/playbooks?limit=1&page=2`)
    expect(page1.body.total).toBe(2)
    expect([...page1.body.playbooks, ...page2.body.playbooks].map((p: Json) => p.id).sort()).toEqual([id, second.body.id].sort())
    expect((await t.s.request(`/v1/profiles/${t.profileId}/playbooks`, { token: other.token })).status).toBe(404)
    expect((await t.s.request(`/v1/playbooks/${id}`, { token: other.token })).status).toBe(404)

    const updated = await t.call('PATCH', `/v1/playbooks/${id}`, { name: 'Daily digest', max_turns: null })
    expect(updated.body).toMatchObject({ name: 'Daily digest', max_turns: null, prompt: 'Write the digest.' })
    expect((await t.call('GET', `/v1/playbooks/${id}`)).body).toEqual(updated.body)
    expect((await t.call('PATCH', `/v1/playbooks/${id}`, { profile_id: foreign })).status).toBe(400)

    expect((await t.call('DELETE', `/v1/playbooks/${id}`)).status).toBe(204)
    expect((await t.call('GET', `/v1/playbooks/${id}`)).status).toBe(404)
    expect((await t.call('GET', `/v1/playbooks/${id}/runs`)).status).toBe(404)
    expect((await t.call('DELETE', `/v1/playbooks/${id}`)).status).toBe(404)
    await t.call('DELETE', `/v1/playbooks/${second.body.id}`)
  })

  it('two rapid runs are two runs in two pb- workspaces that the workspace list leaves out', async () => {
    const pb = (await t.call('POST', '/v1/playbooks', { profile_id: t.profileId, name: 'Twice', prompt: 'Report in. [[berth:text Reporting in.]]' })).body
    const [a, b] = await Promise.all([t.call('POST', `/v1/playbooks/${pb.id}/run`), t.call('POST', `/v1/playbooks/${pb.id}/run`)])
    for (const r of [a, b]) {
      expect(r.status).toBe(202)
      expect(r.body).toEqual({ status: 'started', playbook_id: pb.id, run_id: expect.stringMatching(/^run_/) })
    }
    expect(a.body.run_id).not.toBe(b.body.run_id)

    const runs = await finishedRuns(pb.id, 2)
    expect(runs.map((r) => r.id).sort()).toEqual([a.body.run_id, b.body.run_id].sort())
    for (const run of runs) {
      expect(run).toMatchObject({ status: 'completed', trigger: 'manual', error: null, session_id: expect.stringMatching(/^pb-/) })
      const task = (await t.call('GET', `/v1/tasks/${run.task_id}`)).body as Task
      expect(task).toMatchObject({ status: 'completed', mode: 'session', session_id: run.session_id, workspace_id: run.workspace_id })
      expect(task.result!.text).toContain('Reporting in.')
    }
    const wsIds = runs.map((r) => r.workspace_id!)
    expect(new Set(wsIds).size).toBe(2)

    // The owner can open them, but the list does not show them.
    const listed = (await t.call('GET', '/v1/workspaces?limit=100')).body.workspaces as Json[]
    expect(listed.map((w) => w.id)).not.toEqual(expect.arrayContaining([wsIds[0]]))
    expect(listed.map((w) => w.id)).not.toEqual(expect.arrayContaining([wsIds[1]]))
    expect(listed.every((w) => !String(w.session_id).startsWith('pb-'))).toBe(true)
    for (const wsId of wsIds) {
      // Its container goes as soon as the run ends (no session idle time holding a slot).
      await vi.waitFor(async () => {
        expect((await t.call('GET', `/v1/workspaces/${wsId}`)).body).toMatchObject({ session_id: expect.stringMatching(/^pb-/), status: 'idle', container_id: null })
      }, 15_000)
    }
  })

  it('the webhook with the right secret starts a run whose task carries the posted JSON body', async () => {
    const pb = (await t.call('POST', '/v1/playbooks', { profile_id: t.profileId, name: 'On order', prompt: 'Handle the new order. [[berth:text Order handled.]]', trigger_type: 'webhook' })).body
    expect(pb.webhook_secret).toMatch(/^whsec_[a-z0-9]{40}$/)
    expect(pb.webhook_path).toBe(`/api/playbooks/${pb.id}/webhook/{secret}`)
    expect(pb.has_webhook_secret).toBe(true)
    expect((await t.call('GET', `/v1/playbooks/${pb.id}`)).body).not.toHaveProperty('webhook_secret')

    const payload = { order: 'ORD-7731', items: [{ sku: 'PELICAN', qty: 2 }], note: 'has ``` backticks' }
    const res = await t.s.request(`/api/playbooks/${pb.id}/webhook/${pb.webhook_secret}`, { method: 'POST', json: payload })
    expect(res.status).toBe(202)
    const started = (await res.json()) as Json
    expect(started).toEqual({ status: 'started', playbook_id: pb.id, run_id: expect.stringMatching(/^run_/) })
    expect(res.headers.get('ratelimit-limit')).toBeNull()

    const [run] = await finishedRuns(pb.id, 1)
    expect(run).toMatchObject({ id: started.run_id, trigger: 'webhook', status: 'completed' })
    const task = (await t.call('GET', `/v1/tasks/${run!.task_id}`)).body as Task
    expect(task.prompt.startsWith('Handle the new order.')).toBe(true)
    expect(task.prompt).toContain(JSON.stringify(payload))
    // The fence is longer than any backtick run in the body, so the body cannot close it.
    expect(task.prompt).toMatch(/````json\n/)
    const events = (await t.call('GET', `/v1/tasks/${run!.task_id}/events?limit=100`)).body.events as TranscriptEvent[]
    const prompt = events.find((e) => e.type === 'user_message') as TranscriptEvent & { text: string }
    expect(prompt.text).toContain('ORD-7731')
    expect(task.result!.text).toContain('Order handled.')
  })

  it("a run inherits the playbook's limits: max_turns fails it with TURN_LIMIT_EXCEEDED", async () => {
    const pb = (await t.call('POST', '/v1/playbooks', { profile_id: t.profileId, name: 'Loop', prompt: 'Loop. [[berth:turns 6]]', max_turns: 2 })).body
    await t.call('POST', `/v1/playbooks/${pb.id}/run`)
    const [run] = await finishedRuns(pb.id, 1)
    expect(run).toMatchObject({ status: 'failed', error: { code: 'TURN_LIMIT_EXCEEDED' } })
  })
})

describe('the webhook trigger', () => {
  let s: TestServer
  let token: string
  let profileId: string
  const call = async (method: string, path: string, json?: unknown) => {
    const res = await s.request(path, { method, token, ...(json !== undefined && { json }) })
    const text = await res.text()
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json, headers: res.headers }
  }
  const fire = (id: string, secret: string, init: RequestInit & { json?: unknown } = {}) => s.request(`/api/playbooks/${id}/webhook/${secret}`, { method: 'POST', ...init })
  const webhookPlaybook = async (name = 'Hook') =>
    (await call('POST', '/v1/playbooks', { profile_id: profileId, name, prompt: 'React.', trigger_type: 'webhook' })).body as { id: string; webhook_secret: string }

  // Every store read, to tell which lookups a request made.
  const storage = createStorage()
  const reads: string[] = []
  const getItem = storage.getItem.bind(storage)
  storage.getItem = ((key: string, ...rest: unknown[]) => {
    reads.push(key)
    return (getItem as (...a: unknown[]) => Promise<unknown>)(key, ...rest)
  }) as typeof storage.getItem

  beforeAll(async () => {
    // No engine: runs are recorded, and fail at once (no container can start).
    s = await startServer({ storage, playbookWebhookRate: { rpm: 60, burst: 3 } })
    token = (await s.user()).token
    const key = await call('POST', '/v1/api-keys', { name: 'k', provider: 'stub' })
    profileId = (await call('POST', '/v1/profiles', { name: 'P', slug: 'p', api_key_id: key.body.id })).body.id
  })
  afterAll(() => s.close())

  it('answers an unknown playbook, a wrong or missing secret and a manual playbook with the same 404', async () => {
    const pb = await webhookPlaybook()
    const manual = (await call('POST', '/v1/playbooks', { profile_id: profileId, name: 'Manual', prompt: 'x' })).body
    const rotated = (await call('POST', `/v1/playbooks/${manual.id}/webhook-secret`)).body
    expect(rotated.webhook_secret).toMatch(/^whsec_/)

    const answers: { status: number; body: Json }[] = []
    for (const res of [
      await fire('pb_zzzzzzzzzzzzzzzzzzzz', pb.webhook_secret, { json: {} }),
      // The last character changed (to `x`, or `y` for a secret that ends in `x`).
      await fire(pb.id, `${pb.webhook_secret.slice(0, -1)}${pb.webhook_secret.endsWith('x') ? 'y' : 'x'}`, { json: {} }),
      await fire(pb.id, 'whsec_', { json: {} }),
      await fire(manual.id, rotated.webhook_secret, { json: {} }),
    ]) {
      answers.push({ status: res.status, body: (await res.json()) as Json })
    }
    for (const a of answers) {
      expect(a.status).toBe(404)
      expect(a.body).toEqual({ code: 'NOT_FOUND', error: expect.stringMatching(/^playbook pb_\w+ not found$/) })
    }
    // No secret segment at all: no route.
    expect((await fire(pb.id, '')).status).toBe(404)
    // None of them started a run.
    expect((await call('GET', `/v1/playbooks/${pb.id}/runs`)).body.total).toBe(0)
    expect((await call('GET', `/v1/playbooks/${manual.id}/runs`)).body.total).toBe(0)
  })

  it('refuses a wrong secret and an unknown playbook by the same path: one lookup, one constant-time comparison of equal lengths', async () => {
    const pb = await webhookPlaybook('Same path')
    const wrong = `whsec_${'0'.repeat(40)}`
    /** The store reads and comparisons one refused request makes. */
    const trace = async (id: string) => {
      reads.length = 0
      compares.mockClear()
      const res = await fire(id, wrong, { json: { ping: 1 } })
      expect(res.status).toBe(404)
      return {
        reads: reads.map((k) => k.replace(id, '<id>')),
        compares: compares.mock.calls.map(([a, b]) => [a.byteLength, b.byteLength]),
        matched: compares.mock.results.map((r) => r.value),
      }
    }
    const known = await trace(pb.id)
    const unknown = await trace('pb_zzzzzzzzzzzzzzzzzzzz')
    // The unknown id is looked up and compared (against a decoy) like a real one.
    expect(known).toEqual({ reads: [expect.stringContaining('<id>')], compares: [[32, 32]], matched: [false] })
    expect(unknown).toEqual(known)
  })

  it('rotating the secret retires the old one; GET never shows a secret', async () => {
    const pb = await webhookPlaybook('Rotating')
    const rotated = (await call('POST', `/v1/playbooks/${pb.id}/webhook-secret`)).body
    expect(rotated).toEqual({ playbook_id: pb.id, webhook_secret: expect.stringMatching(/^whsec_/), webhook_path: `/api/playbooks/${pb.id}/webhook/${rotated.webhook_secret}` })
    expect(rotated.webhook_secret).not.toBe(pb.webhook_secret)
    expect((await fire(pb.id, pb.webhook_secret, { json: {} })).status).toBe(404)
    expect((await fire(pb.id, rotated.webhook_secret, { json: {} })).status).toBe(202)
    const reads = JSON.stringify([(await call('GET', `/v1/playbooks/${pb.id}`)).body, (await call('GET', `/v1/profiles/${profileId}/playbooks?limit=100`)).body])
    expect(reads).not.toContain(pb.webhook_secret)
    expect(reads).not.toContain(rotated.webhook_secret)
    // Request log lines carry the path without the secret.
    expect(s.logs.join('\n')).not.toContain(rotated.webhook_secret)
    expect(s.logs.some((l) => l.includes(`/api/playbooks/${pb.id}/webhook/[redacted]`))).toBe(true)
  })

  it('switching a playbook to webhook generates a secret, shown in that answer', async () => {
    const pb = (await call('POST', '/v1/playbooks', { profile_id: profileId, name: 'Later', prompt: 'x' })).body
    const switched = (await call('PATCH', `/v1/playbooks/${pb.id}`, { trigger_type: 'webhook' })).body
    expect(switched).toMatchObject({ trigger_type: 'webhook', has_webhook_secret: true, webhook_secret: expect.stringMatching(/^whsec_/) })
    expect((await fire(pb.id, switched.webhook_secret, { json: {} })).status).toBe(202)
    // Back to manual: the webhook stops answering, though the secret is kept.
    await call('PATCH', `/v1/playbooks/${pb.id}`, { trigger_type: 'manual' })
    expect((await fire(pb.id, switched.webhook_secret, { json: {} })).status).toBe(404)
  })

  it('rate-limits each playbook on its own: 429 with Retry-After, refilled over time', async () => {
    const a = await webhookPlaybook('Busy')
    const b = await webhookPlaybook('Quiet')
    for (let i = 0; i < 3; i++) expect((await fire(a.id, a.webhook_secret, { json: { i } })).status).toBe(202)
    const limited = await fire(a.id, a.webhook_secret, { json: {} })
    expect(limited.status).toBe(429)
    expect(limited.headers.get('retry-after')).toBe('1')
    expect(await limited.json()).toMatchObject({ code: 'RATE_LIMITED', details: { limit: 3 } })
    expect((await fire(b.id, b.webhook_secret, { json: {} })).status).toBe(202)
    // A wrong secret does not spend (or reveal) the budget: still the plain 404.
    expect((await fire(a.id, 'whsec_wrong', { json: {} })).status).toBe(404)
    s.clock.advance(1000)
    expect((await fire(a.id, a.webhook_secret, { json: {} })).status).toBe(202)
    expect((await call('GET', `/v1/playbooks/${a.id}/runs`)).body.total).toBe(4)
  })

  it('hands JSON bodies up to 64 KiB to the run; larger is 413, not JSON is 400', async () => {
    const pb = await webhookPlaybook('Bodies')
    const big = JSON.stringify({ blob: 'x'.repeat(64 * 1024) })
    const tooLarge = await fire(pb.id, pb.webhook_secret, { headers: { 'content-type': 'application/json' }, body: big })
    expect(tooLarge.status).toBe(413)
    expect(await tooLarge.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' })
    const notJson = await fire(pb.id, pb.webhook_secret, { headers: { 'content-type': 'application/json' }, body: '{"a":' })
    expect(notJson.status).toBe(400)
    const text = await fire(pb.id, pb.webhook_secret, { headers: { 'content-type': 'text/plain' }, body: 'hello' })
    expect(text.status).toBe(400)
    // Every call holding the secret spends from the bucket (3): refill it.
    s.clock.advance(3000)
    expect((await fire(pb.id, pb.webhook_secret)).status).toBe(202)
    expect((await fire(pb.id, pb.webhook_secret, { json: [1, 2, 3] })).status).toBe(202)
  })

  it('a run whose task cannot start is still a run: 202, then failed with the reason', async () => {
    const pb = await webhookPlaybook('No engine')
    const res = await call('POST', `/v1/playbooks/${pb.id}/run`)
    expect(res.status).toBe(202)
    const runs = (await call('GET', `/v1/playbooks/${pb.id}/runs`)).body
    expect(runs).toEqual({
      total: 1,
      runs: [expect.objectContaining({ id: res.body.run_id, status: 'failed', trigger: 'manual', task_id: null, error: { code: 'CONTAINER_FAILED', error: expect.any(String) } })],
    })
    expect((await call('GET', `/v1/playbooks/${pb.id}/runs?status=completed`)).body.total).toBe(0)
  })
})
