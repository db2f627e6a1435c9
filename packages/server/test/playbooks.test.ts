/**
 * Playbooks: stored prompts that run as tasks in `pb-` session workspaces, on demand or
 * by their webhook. Runs execute for real (Podman, the runner, the offline model); the
 * webhook's refusals, rate limit and constant-time path are checked on a server without an engine.
 */
import { timingSafeEqual } from 'node:crypto'
import { createStorage } from 'unstorage'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { BerthClient } from '@berth/client'
import { clientFor, failure, startServer, type TestServer } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

// The secret comparisons the services make, observed (they still compare for real).
vi.mock('node:crypto', async (original) => {
  const crypto = await original<typeof import('node:crypto')>()
  return { ...crypto, timingSafeEqual: vi.fn(crypto.timingSafeEqual) }
})
const compares = vi.mocked(timingSafeEqual)

type Run = {
  id: string
  status: string
  trigger: string
  task_id: string | null
  workspace_id: string | null
  session_id: string | null
  error: { code: string; error: string } | null
}
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
      const runs: Run[] = (await t.api.playbooks.runs({ params: { id: pbId }, query: { limit: 100 } })).runs
      expect(runs.filter((r) => DONE.includes(r.status))).toHaveLength(count)
      return runs
    }, 90_000)

  it('is created on one of your profiles, listed per profile, updated and deleted with its runs', async () => {
    const other = await t.s.user('Mallory')
    const otherApi = clientFor(t.s, other.token)
    const otherKey = await otherApi.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    const foreign = (await otherApi.profiles.create({ body: { name: 'M', slug: 'm', api_key_id: otherKey.id } })).id

    const refused = await failure(t.api.playbooks.create({ body: { profile_id: foreign, name: 'Steal', prompt: 'x' } }))
    expect(refused.status).toBe(400)
    expect(refused).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: { issues: [expect.objectContaining({ path: 'profile_id' })] },
    })

    const created = await t.api.playbooks.create({
      body: {
        profile_id: t.profileId,
        name: 'Digest',
        prompt: 'Write the digest.',
        max_turns: 3,
        allowed_tools: ['Bash'],
      },
    })
    expect(created).toMatchObject({
      profile_id: t.profileId,
      name: 'Digest',
      trigger_type: 'manual',
      max_turns: 3,
      max_budget_usd: null,
      allowed_tools: ['Bash'],
      has_webhook_secret: false,
      webhook_path: null,
    })
    expect(created.id).toMatch(/^pb_/)
    expect(created).not.toHaveProperty('webhook_secret')
    const id = created.id

    const second = await t.api.playbooks.create({
      body: { profile_id: t.profileId, name: 'Second', prompt: 'Another.' },
    })
    const page1 = await t.api.profiles.playbooks({ params: { id: t.profileId }, query: { limit: 1 } })
    const page2 = await t.api.profiles.playbooks({ params: { id: t.profileId }, query: { limit: 1, page: 2 } })
    expect(page1.total).toBe(2)
    expect([...page1.playbooks, ...page2.playbooks].map((p) => p.id).sort()).toEqual([id, second.id].sort())
    expect((await failure(otherApi.profiles.playbooks({ params: { id: t.profileId } }))).status).toBe(404)
    expect((await failure(otherApi.playbooks.get({ params: { id } }))).status).toBe(404)

    const updated = await t.api.playbooks.update({ params: { id }, body: { name: 'Daily digest', max_turns: null } })
    expect(updated).toMatchObject({ name: 'Daily digest', max_turns: null, prompt: 'Write the digest.' })
    expect(await t.api.playbooks.get({ params: { id } })).toEqual(updated)
    expect((await failure(t.api.playbooks.update({ params: { id }, body: { profile_id: foreign } }))).status).toBe(400)

    await t.api.playbooks.delete({ params: { id } })
    expect((await failure(t.api.playbooks.get({ params: { id } }))).status).toBe(404)
    expect((await failure(t.api.playbooks.runs({ params: { id } }))).status).toBe(404)
    expect((await failure(t.api.playbooks.delete({ params: { id } }))).status).toBe(404)
    await t.api.playbooks.delete({ params: { id: second.id } })
  })

  it('two rapid runs are two runs in two pb- workspaces that the workspace list leaves out', async () => {
    const pb = await t.api.playbooks.create({
      body: { profile_id: t.profileId, name: 'Twice', prompt: 'Report in. [[berth:text Reporting in.]]' },
    })
    const [a, b] = await Promise.all([
      t.api.playbooks.run({ params: { id: pb.id } }),
      t.api.playbooks.run({ params: { id: pb.id } }),
    ])
    for (const r of [a, b])
      expect(r).toEqual({ status: 'started', playbook_id: pb.id, run_id: expect.stringMatching(/^run_/) })
    expect(a.run_id).not.toBe(b.run_id)

    const runs = await finishedRuns(pb.id, 2)
    expect(runs.map((r) => r.id).sort()).toEqual([a.run_id, b.run_id].sort())
    for (const run of runs) {
      expect(run).toMatchObject({
        status: 'completed',
        trigger: 'manual',
        error: null,
        session_id: expect.stringMatching(/^pb-/),
      })
      const task = await t.api.tasks.get({ params: { id: run.task_id! } })
      expect(task).toMatchObject({
        status: 'completed',
        mode: 'session',
        session_id: run.session_id,
        workspace_id: run.workspace_id,
      })
      expect(task.result!.text).toContain('Reporting in.')
    }
    const wsIds = runs.map((r) => r.workspace_id!)
    expect(new Set(wsIds).size).toBe(2)

    // The owner can open them, but the list does not show them.
    const listed = (await t.api.workspaces.list({ query: { limit: 100 } })).workspaces
    expect(listed.map((w) => w.id)).not.toEqual(expect.arrayContaining([wsIds[0]]))
    expect(listed.map((w) => w.id)).not.toEqual(expect.arrayContaining([wsIds[1]]))
    expect(listed.every((w) => !String(w.session_id).startsWith('pb-'))).toBe(true)
    for (const wsId of wsIds) {
      // Its container goes as soon as the run ends (no session idle time holding a slot).
      await vi.waitFor(async () => {
        expect(await t.api.workspaces.get({ params: { id: wsId } })).toMatchObject({
          session_id: expect.stringMatching(/^pb-/),
          status: 'idle',
          container_id: null,
        })
      }, 15_000)
    }
  })

  it('the webhook with the right secret starts a run whose task carries the posted JSON body', async () => {
    const pb = await t.api.playbooks.create({
      body: {
        profile_id: t.profileId,
        name: 'On order',
        prompt: 'Handle the new order. [[berth:text Order handled.]]',
        trigger_type: 'webhook',
      },
    })
    expect(pb.webhook_secret).toMatch(/^whsec_[a-z0-9]{40}$/)
    expect(pb.webhook_path).toBe(`/api/playbooks/${pb.id}/webhook/{secret}`)
    expect(pb.has_webhook_secret).toBe(true)
    expect(await t.api.playbooks.get({ params: { id: pb.id } })).not.toHaveProperty('webhook_secret')

    const payload = { order: 'ORD-7731', items: [{ sku: 'PELICAN', qty: 2 }], note: 'has ``` backticks' }
    const res = await t.s.request(`/api/playbooks/${pb.id}/webhook/${pb.webhook_secret}`, {
      method: 'POST',
      json: payload,
    })
    expect(res.status).toBe(202)
    const started = (await res.json()) as { run_id: string }
    expect(started).toEqual({ status: 'started', playbook_id: pb.id, run_id: expect.stringMatching(/^run_/) })
    expect(res.headers.get('ratelimit-limit')).toBeNull()

    const [run] = await finishedRuns(pb.id, 1)
    expect(run).toMatchObject({ id: started.run_id, trigger: 'webhook', status: 'completed' })
    const task = await t.api.tasks.get({ params: { id: run!.task_id! } })
    expect(task.prompt.startsWith('Handle the new order.')).toBe(true)
    expect(task.prompt).toContain(JSON.stringify(payload))
    // The fence is longer than any backtick run in the body, so the body cannot close it.
    expect(task.prompt).toMatch(/````json\n/)
    const events = await t.events(run!.task_id!)
    expect(events.find((e) => e.type === 'user_message')).toMatchObject({ text: expect.stringContaining('ORD-7731') })
    expect(task.result!.text).toContain('Order handled.')
  })

  it("a run inherits the playbook's limits: max_turns fails it with TURN_LIMIT_EXCEEDED", async () => {
    const pb = await t.api.playbooks.create({
      body: { profile_id: t.profileId, name: 'Loop', prompt: 'Loop. [[berth:turns 6]]', max_turns: 2 },
    })
    await t.api.playbooks.run({ params: { id: pb.id } })
    const [run] = await finishedRuns(pb.id, 1)
    expect(run).toMatchObject({ status: 'failed', error: { code: 'TURN_LIMIT_EXCEEDED' } })
  })
})

describe('the webhook trigger', () => {
  let s: TestServer
  let api: BerthClient
  let profileId: string
  // Raw: the webhook is called as a third party would, without a Berth key.
  const fire = (id: string, secret: string, init: RequestInit & { json?: unknown } = {}) =>
    s.request(`/api/playbooks/${id}/webhook/${secret}`, { method: 'POST', ...init })
  const webhookPlaybook = async (name = 'Hook') => {
    const pb = await api.playbooks.create({
      body: { profile_id: profileId, name, prompt: 'React.', trigger_type: 'webhook' },
    })
    return { ...pb, webhook_secret: pb.webhook_secret! }
  }
  const runCount = async (id: string) => (await api.playbooks.runs({ params: { id } })).total

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
    api = clientFor(s, (await s.user()).token)
    const key = await api.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    profileId = (await api.profiles.create({ body: { name: 'P', slug: 'p', api_key_id: key.id } })).id
  })
  afterAll(() => s.close())

  it('answers an unknown playbook, a wrong or missing secret and a manual playbook with the same 404', async () => {
    const pb = await webhookPlaybook()
    const manual = await api.playbooks.create({ body: { profile_id: profileId, name: 'Manual', prompt: 'x' } })
    const rotated = await api.playbooks.rotateWebhookSecret({ params: { id: manual.id } })
    expect(rotated.webhook_secret).toMatch(/^whsec_/)

    const answers: { status: number; body: unknown }[] = []
    for (const res of [
      await fire('pb_zzzzzzzzzzzzzzzzzzzz', pb.webhook_secret, { json: {} }),
      // The last character changed (to `x`, or `y` for a secret that ends in `x`).
      await fire(pb.id, `${pb.webhook_secret.slice(0, -1)}${pb.webhook_secret.endsWith('x') ? 'y' : 'x'}`, {
        json: {},
      }),
      await fire(pb.id, 'whsec_', { json: {} }),
      await fire(manual.id, rotated.webhook_secret, { json: {} }),
    ]) {
      answers.push({ status: res.status, body: await res.json() })
    }
    for (const a of answers) {
      expect(a.status).toBe(404)
      expect(a.body).toEqual({ code: 'NOT_FOUND', error: expect.stringMatching(/^playbook pb_\w+ not found$/) })
    }
    // No secret segment at all: no route.
    expect((await fire(pb.id, '')).status).toBe(404)
    // None of them started a run.
    expect(await runCount(pb.id)).toBe(0)
    expect(await runCount(manual.id)).toBe(0)
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
    const rotated = await api.playbooks.rotateWebhookSecret({ params: { id: pb.id } })
    expect(rotated).toEqual({
      playbook_id: pb.id,
      webhook_secret: expect.stringMatching(/^whsec_/),
      webhook_path: `/api/playbooks/${pb.id}/webhook/${rotated.webhook_secret}`,
    })
    expect(rotated.webhook_secret).not.toBe(pb.webhook_secret)
    expect((await fire(pb.id, pb.webhook_secret, { json: {} })).status).toBe(404)
    expect((await fire(pb.id, rotated.webhook_secret, { json: {} })).status).toBe(202)
    const reads = JSON.stringify([
      await api.playbooks.get({ params: { id: pb.id } }),
      await api.profiles.playbooks({ params: { id: profileId }, query: { limit: 100 } }),
    ])
    expect(reads).not.toContain(pb.webhook_secret)
    expect(reads).not.toContain(rotated.webhook_secret)
    // Request log lines carry the path without the secret.
    expect(s.logs.join('\n')).not.toContain(rotated.webhook_secret)
    expect(s.logs.some((l) => l.includes(`/api/playbooks/${pb.id}/webhook/[redacted]`))).toBe(true)
  })

  it('switching a playbook to webhook generates a secret, shown in that answer', async () => {
    const pb = await api.playbooks.create({ body: { profile_id: profileId, name: 'Later', prompt: 'x' } })
    const switched = await api.playbooks.update({ params: { id: pb.id }, body: { trigger_type: 'webhook' } })
    expect(switched).toMatchObject({
      trigger_type: 'webhook',
      has_webhook_secret: true,
      webhook_secret: expect.stringMatching(/^whsec_/),
    })
    expect((await fire(pb.id, switched.webhook_secret!, { json: {} })).status).toBe(202)
    // Back to manual: the webhook stops answering, though the secret is kept.
    await api.playbooks.update({ params: { id: pb.id }, body: { trigger_type: 'manual' } })
    expect((await fire(pb.id, switched.webhook_secret!, { json: {} })).status).toBe(404)
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
    expect(await runCount(a.id)).toBe(4)
  })

  it('hands JSON bodies up to 64 KiB to the run; larger is 413, malformed JSON 400, not sent as JSON 415', async () => {
    const pb = await webhookPlaybook('Bodies')
    const big = JSON.stringify({ blob: 'x'.repeat(64 * 1024) })
    const tooLarge = await fire(pb.id, pb.webhook_secret, {
      headers: { 'content-type': 'application/json' },
      body: big,
    })
    expect(tooLarge.status).toBe(413)
    expect(await tooLarge.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' })
    const notJson = await fire(pb.id, pb.webhook_secret, {
      headers: { 'content-type': 'application/json' },
      body: '{"a":',
    })
    expect(notJson.status).toBe(400)
    const text = await fire(pb.id, pb.webhook_secret, { headers: { 'content-type': 'text/plain' }, body: 'hello' })
    expect(text.status).toBe(415)
    // Every call holding the secret spends from the bucket (3): refill it.
    s.clock.advance(3000)
    expect((await fire(pb.id, pb.webhook_secret)).status).toBe(202)
    expect((await fire(pb.id, pb.webhook_secret, { json: [1, 2, 3] })).status).toBe(202)
  })

  it('a run whose task cannot start is still a run: 202, then failed with the reason', async () => {
    const pb = await webhookPlaybook('No engine')
    const res = await api.playbooks.run({ params: { id: pb.id } })
    expect(res).toMatchObject({ status: 'started' })
    const runs = await api.playbooks.runs({ params: { id: pb.id } })
    expect(runs).toEqual({
      total: 1,
      next_cursor: null,
      runs: [
        expect.objectContaining({
          id: res.run_id,
          status: 'failed',
          trigger: 'manual',
          task_id: null,
          error: { code: 'CONTAINER_FAILED', error: expect.any(String) },
        }),
      ],
    })
    expect((await api.playbooks.runs({ params: { id: pb.id }, query: { status: 'completed' } })).total).toBe(0)
  })
})
