/**
 * Usage and monthly spending limits end to end (issue 28): two Berth instances on one
 * redis-server (store and coordination), each running tasks on its own `local` runtime
 * (bubblewrap) with the real runner, the Claude Agent SDK and the offline model reached
 * through each instance's model gateway on a metered Anthropic credential. The model
 * answers each call with the usage its prompt asks for, priced by the gateway at
 * claude-sonnet-4-5's rates ($3 per million input tokens): `input=10000` costs $0.03 a call.
 */
import type { BerthClient } from '@berth/client'
import type { Task } from '@berth/core'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { ADMIN_TOKEN, startCluster, type Cluster, type Instance } from './cluster.helpers.js'
import { failure, waitForTask } from './helpers.js'

const MODEL_KEY = 'sk-ant-api03-USAGEKEY-4f8a1c9d2e7b'
const MODEL = 'claude-sonnet-4-5'
/** The first of next month (UTC): when a monthly limit resets. */
const NEXT_MONTH = (() => {
  const d = new Date()
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)).toISOString()
})()

let redis: LocalRedis
let upstream: OfflineModelServer
let c: Cluster
let a: Instance
let b: Instance

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startOfflineModel({ apiKey: MODEL_KEY })
  c = await startCluster('redis', { redis, local: { maxes: [3, 3], sandbox: 'bwrap' } })
  ;[a, b] = c.instances as [Instance, Instance]
}, 120_000)
afterAll(async () => {
  await c?.close()
  await upstream?.close()
  await redis?.stop()
})

/** A caller with a metered Anthropic credential (the offline model behind the gateway) and a profile `one`. */
async function meteredCaller(name: string) {
  const user = await c.user(name)
  const api = (inst: Instance = a) => inst.client(user.token)
  const key = await api().apiKeys.create({
    body: { name: 'metered', provider: 'anthropic', key: MODEL_KEY, base_url: upstream.url },
  })
  const profile = (slug: string, monthly_budget_usd?: number) =>
    api().profiles.create({
      body: { name: slug, slug, api_key_id: key.id, default_tools: ['Bash'], model: MODEL, monthly_budget_usd },
    })
  const one = await profile('one')
  const submit = (inst: Instance, prompt: string, profileId = one.id) =>
    api(inst).tasks.submit({ body: { mode: 'batch', profile_id: profileId, prompt } })
  const run = async (inst: Instance, prompt: string, profileId = one.id): Promise<Task> =>
    waitForTask(api(inst), (await submit(inst, prompt, profileId)).task_id, { timeout: 120_000 })
  return { ...user, api, profile, one, submit, run }
}

const admin = (inst: Instance): BerthClient => inst.client(ADMIN_TOKEN)
/** `calls` tool-calling turns, each model call reporting `input` tokens, then a final answer. */
const spend = (input: number, turns: number) =>
  `Spend. [[berth:usage input=${input} output=0]] [[berth:turns ${turns}]] [[berth:text Finished spending.]]`

describe('usage', () => {
  it('reports tokens, cost, tasks and time by day, profile and model, the same on each instance, never another caller’s', async () => {
    const ada = await meteredCaller('Ada')
    const two = await ada.profile('two')
    const bob = await meteredCaller('Bob')
    const tasks = await Promise.all([
      ada.run(a, `One. [[berth:usage input=1000 output=100]] [[berth:turns 1]] [[berth:text Done one.]]`),
      ada.run(b, `Two. [[berth:usage input=2000 output=200]] [[berth:text Done two.]]`, two.id),
      bob.run(a, `Bob's. [[berth:usage input=3000 output=300]] [[berth:text Done.]]`),
    ])
    for (const t of tasks) expect([t.status, t.error]).toEqual(['completed', null])
    const [first, second] = tasks as [Task, Task, Task]

    const byProfile = await ada.api(b).usage.get({ query: { group_by: 'profile' } })
    expect(byProfile.groups.map((g) => [g.user_id, g.key, g.tasks])).toEqual(
      expect.arrayContaining([
        [ada.id, ada.one.id, 1],
        [ada.id, two.id, 1],
      ]),
    )
    expect(byProfile.groups).toHaveLength(2)
    // The first task made at least two model calls (a tool turn, then the answer) of 1000 input tokens each.
    const one = byProfile.groups.find((g) => g.key === ada.one.id)!
    expect(one.model_calls).toBeGreaterThanOrEqual(2)
    expect(one.input_tokens).toBeGreaterThanOrEqual(2000)
    expect(one.task_seconds).toBeGreaterThan(0)
    // Each task's result carries what the gateway metered for it.
    expect(first.result!.cost_usd).toBeCloseTo(one.cost_usd, 6)
    expect(first.result!.input_tokens).toBe(one.input_tokens + one.cache_read_tokens + one.cache_write_tokens)
    expect(second.result!.cost_usd).toBeCloseTo(byProfile.groups.find((g) => g.key === two.id)!.cost_usd, 6)

    const byModel = await ada.api(a).usage.get({ query: { group_by: 'model' } })
    expect(byModel.groups.map((g) => g.key)).toContain(MODEL)
    expect(byModel.total).toEqual(byProfile.total)
    const byDay = await ada.api(a).usage.get({ query: {} })
    expect(byDay.group_by).toBe('day')
    expect(byDay.groups).toEqual([expect.objectContaining({ user_id: ada.id, tasks: 2 })])
    expect(byDay.total.cost_usd).toBeCloseTo(first.result!.cost_usd + second.result!.cost_usd, 6)

    // Another caller's usage is never in an answer; the operator sees both, or one on asking.
    expect(JSON.stringify([byProfile, byModel, byDay])).not.toContain(bob.id)
    const bobs = await bob.api(b).usage.get({ query: { group_by: 'profile' } })
    expect(bobs.groups.map((g) => g.user_id)).toEqual([bob.id])
    const all = await admin(b).admin.usage({ query: { group_by: 'profile' } })
    expect(new Set(all.groups.map((g) => g.user_id))).toEqual(new Set([ada.id, bob.id]))
    expect((await admin(a).admin.usage({ query: { group_by: 'profile', user_id: ada.id } })).groups).toEqual(
      byProfile.groups,
    )

    // A task the gateway does not see (the built-in offline model, served by the runner): the calls its runner counted, once.
    const stu = await c.user('Stu')
    const stuApi = b.client(stu.token)
    const stub = await stuApi.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
    const p = await stuApi.profiles.create({ body: { name: 'Stub', slug: 'stub', api_key_id: stub.id } })
    const body = { mode: 'batch' as const, profile_id: p.id, prompt: 'Hi. [[berth:usage input=500 output=50]]' }
    const unmetered = await waitForTask(stuApi, (await stuApi.tasks.submit({ body })).task_id)
    expect(unmetered.status).toBe('completed')
    expect(unmetered.result!.cost_usd).toBeGreaterThan(0)
    const stus = await a.client(stu.token).usage.get({ query: {} })
    expect(stus.total).toMatchObject({ tasks: 1, model_calls: 1, input_tokens: 500, output_tokens: 50 })
    expect(unmetered.result).toMatchObject({ input_tokens: 500, output_tokens: 50 })
    expect(stus.total.cost_usd).toBeCloseTo(unmetered.result!.cost_usd, 6)

    // Bad ranges are 400 naming the field.
    for (const query of [{ from: '2026-13-01' }, { from: '2026-02-30' }, { from: '2026-05-02', to: '2026-05-01' }]) {
      const err = await failure(ada.api(a).usage.get({ query }))
      expect([err.status, err.code]).toEqual([400, 'VALIDATION_FAILED'])
    }
    const tooLong = await failure(ada.api(a).usage.get({ query: { from: '2024-01-01', to: '2025-06-01' } }))
    expect(tooLong.status).toBe(400)
  }, 240_000)
})

describe('monthly spending limits', () => {
  it('a caller’s $0.05: the task that crosses it ends BUDGET_EXCEEDED with its partial result, then submits are 402 with the figures', async () => {
    const cyd = await meteredCaller('Cyd')
    const set = await admin(b).admin.limits.set({ params: { id: cyd.id }, body: { monthly_budget_usd: 0.05 } })
    expect(set).toMatchObject({ user_id: cyd.id, monthly_budget_usd: 0.05, spent_usd: 0, resets_at: NEXT_MONTH })

    // $0.03 a call: the first two pass ($0 and $0.03 spent before each), the third is refused.
    const task = await cyd.run(a, spend(10_000, 4))
    expect(task.status).toBe('failed')
    expect(task.error!.code).toBe('BUDGET_EXCEEDED')
    expect(task.error!.error).toMatch(/caller's monthly spending limit of \$0.05/)
    expect(task.result!.cost_usd).toBeCloseTo(0.06, 6)
    expect(task.result!.tool_calls.length).toBeGreaterThanOrEqual(1)

    for (const inst of [a, b]) {
      const err = await failure(cyd.submit(inst, 'Anything. [[berth:text Hi.]]'))
      expect([err.status, err.code]).toEqual([402, 'BUDGET_EXCEEDED'])
      expect(err.details).toEqual({ scope: 'user', limit: 0.05, spent: expect.closeTo(0.06, 6), resets_at: NEXT_MONTH })
    }
    // Over the WebSocket: the submit is answered with the same error.
    const socket = new WebSocket(`${b.url.replace('http', 'ws')}/v1/ws`, {
      headers: { authorization: `Bearer ${cyd.token}` },
    })
    const answer = new Promise<Record<string, unknown>>((resolve, reject) => {
      socket.on('message', (data) => {
        const m = JSON.parse(String(data)) as Record<string, unknown>
        if (m.type === 'error') resolve(m)
      })
      socket.on('error', reject)
    })
    await new Promise((r) => socket.once('open', r))
    const body = { mode: 'batch', profile_id: cyd.one.id, prompt: 'Over the socket. [[berth:text Hi.]]' }
    socket.send(JSON.stringify({ type: 'submit', request_id: 'over-limit', task: body }))
    expect(await answer).toMatchObject({ request_id: 'over-limit', code: 'BUDGET_EXCEEDED', details: { limit: 0.05 } })
    socket.close()
    expect(await admin(a).admin.limits.get({ params: { id: cyd.id } })).toMatchObject({
      monthly_budget_usd: 0.05,
      spent_usd: expect.closeTo(0.06, 6),
    })
    // Cleared: submits are admitted again.
    await admin(a).admin.limits.set({ params: { id: cyd.id }, body: { monthly_budget_usd: null } })
    const again = await cyd.run(b, 'Again. [[berth:text Back.]]')
    expect(again.status).toBe('completed')
    // An unknown user is 404; a negative limit 400.
    expect((await failure(admin(a).admin.limits.get({ params: { id: 'usr_00000000000000000000' } }))).status).toBe(404)
    const negative = admin(a).admin.limits.set({ params: { id: cyd.id }, body: { monthly_budget_usd: -1 } })
    expect((await failure(negative)).status).toBe(400)
  }, 240_000)

  it('a profile’s limit stops that profile’s tasks and submits; the caller’s other profiles go on', async () => {
    const dee = await meteredCaller('Dee')
    const capped = await dee.api(b).profiles.update({ params: { id: dee.one.id }, body: { monthly_budget_usd: 0.05 } })
    expect(capped.monthly_budget_usd).toBe(0.05)
    const task = await dee.run(b, spend(10_000, 4))
    expect(task.status).toBe('failed')
    expect(task.error!.code).toBe('BUDGET_EXCEEDED')
    expect(task.error!.error).toMatch(/profile's monthly spending limit/)
    const err = await failure(dee.submit(a, 'Anything. [[berth:text Hi.]]'))
    expect([err.status, err.code]).toEqual([402, 'BUDGET_EXCEEDED'])
    expect(err.details).toMatchObject({ scope: 'profile', limit: 0.05, spent: expect.closeTo(0.06, 6) })
    const other = await dee.profile('other')
    expect((await dee.run(a, 'Other. [[berth:text Fine.]]', other.id)).status).toBe('completed')
  }, 240_000)

  it('two instances spending for one caller at once admit no more than the limit plus the calls under way', async () => {
    const eve = await meteredCaller('Eve')
    await admin(a).admin.limits.set({ params: { id: eve.id }, body: { monthly_budget_usd: 0.05 } })
    // $0.006 a call, 16 calls a task: either alone would spend $0.096. Each task has one call under way at most.
    const perCall = 0.006
    const ended = await Promise.all([eve.run(a, spend(2_000, 15)), eve.run(b, spend(2_000, 15))])
    for (const t of ended) expect(t.error?.code).toBe('BUDGET_EXCEEDED')
    // Both instances metered calls (each writes only its own partial sums).
    const keys = await a.berth.store.keys(`usage-day:${eve.id}:`)
    expect(keys).toHaveLength(2)
    const spent = (await admin(b).admin.usage({ query: { user_id: eve.id } })).total.cost_usd
    expect(spent).toBeGreaterThanOrEqual(0.05)
    // Counted per instance instead, each would pass $0.05 on its own: $0.10 at least.
    expect(spent).toBeLessThanOrEqual(0.05 + 2 * perCall + 1e-9)
    expect((await admin(a).admin.limits.get({ params: { id: eve.id } })).spent_usd).toBeCloseTo(spent, 6)
    expect(ended[0]!.result!.cost_usd + ended[1]!.result!.cost_usd).toBeCloseTo(spent, 6)
  }, 240_000)
})
