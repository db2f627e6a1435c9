/**
 * Money in a living session (issue 42) on Docker, through the model gateway to an offline
 * model on this machine standing in for Anthropic (its own record of the answers it gave
 * is the reference): each follow-up's result and the caller's usage count only that task's
 * calls; a background task that ends between two tasks makes its model call in the next
 * one, on that task's account, and none happens between them; a follow-up's
 * `max_budget_usd` holds against its own calls, not the session's earlier ones.
 */
import { costOf, type Task } from '@berth/core'
import { startOfflineModel, type OfflineModelServer, type RecordedAnswer } from '@berth/stub-model'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { AGENT_PID, bash, getServer, SERVED, serverPort, toolOutputs } from './background-work.helpers.js'
import { clientFor, waitForTask } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'
import { USAGE_MODEL, USAGE_MODEL_KEY } from './usage-sessions.helpers.js'

const priced = (answers: readonly RecordedAnswer[]) =>
  answers.reduce(
    (sum, a) => sum + costOf(a.model, { ...a.usage, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }),
    0,
  )

/** $0.0675 a call at Sonnet prices: four calls ($0.27) fit a $0.50 budget, two tasks' worth would not. */
const SMALL = '[[berth:usage input=15000 output=1500]]'
/** $0.27 a call. */
const LARGE = '[[berth:usage input=60000 output=6000]]'
const BUDGET = 0.5

describe('money in a living session on docker, through the model gateway', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let upstream: OfflineModelServer
  beforeAll(async () => {
    upstream = await startOfflineModel({ apiKey: USAGE_MODEL_KEY })
    // The credential's base URL is the offline model on this machine.
    t = await taskServer('docker', { min: 0, berth: { allowPrivateWebhooks: true } })
  })
  afterAll(async () => {
    await t?.s.close()
    await upstream?.close()
    if (t) expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it('each task pays for its own calls, a background end is paid by the next task, and budgets are per task', async () => {
    const { token } = await t.s.user('living-money')
    const api = clientFor(t.s, token)
    const key = await api.apiKeys.create({
      body: { name: 'metered', provider: 'anthropic', key: USAGE_MODEL_KEY, base_url: upstream.url },
    })
    const profile = await api.profiles.create({
      body: { name: 'Money', slug: 'money', api_key_id: key.id, default_tools: ['Bash'], model: USAGE_MODEL },
    })
    let session: string | undefined
    /** Run a session task; the calls the upstream answered while it ran, and what it asked. */
    const run = async (prompt: string) => {
      const answered = upstream.answers.length
      const asked = upstream.requests.length
      const sub = await api.tasks.submit({
        body: {
          mode: 'session',
          profile_id: profile.id,
          prompt,
          max_budget_usd: BUDGET,
          ...(session && { session_id: session }),
        },
      })
      const task = await waitForTask(api, sub.task_id, { timeout: 180_000, interval: 250 })
      session ??= task.session_id!
      return {
        task,
        answers: upstream.answers.slice(answered),
        requests: upstream.requests.slice(asked).filter((r) => r.url.startsWith('/v1/messages')),
      }
    }
    const usageTotal = async () => (await api.usage.get({ query: { group_by: 'day' } })).total
    /** The task's result (and so the ledger's count for it) is exactly the calls the upstream answered it. */
    const expectPaid = (r: { task: Task; answers: RecordedAnswer[] }) => {
      const res = r.task.result!
      expect(res.input_tokens, r.task.task_id).toBe(r.answers.reduce((n, a) => n + a.usage.input_tokens, 0))
      expect(res.output_tokens, r.task.task_id).toBe(r.answers.reduce((n, a) => n + a.usage.output_tokens, 0))
      expect(res.cost_usd, r.task.task_id).toBeCloseTo(priced(r.answers), 9)
    }

    // One: a server and a short build in the background; four calls.
    const port = serverPort()
    const server = `node -e "require('http').createServer((q,r)=>r.end('bg-'+'served')).listen(${port})"`
    const one = await run(
      `Start. ${bash(server, true)} ${bash('sleep 3; echo build-' + 'done', true)} ${bash(AGENT_PID)} [[berth:text Serving.]] ${SMALL}`,
    )
    expect(one.task.status, JSON.stringify(one.task.error)).toBe('completed')
    expect(one.answers).toHaveLength(4)
    expectPaid(one)
    const [pid] = (await toolOutputs(api, one.task.task_id)).filter((o) => o.startsWith('agent-pid:'))
    expect((await usageTotal()).cost_usd).toBeCloseTo(priced(one.answers), 6)
    const afterOne = { answers: upstream.answers.length, requests: upstream.requests.length }

    // Between the tasks the build ends; the agent's notice of it waits for the next task.
    const wsId = one.task.workspace_id!
    await vi.waitFor(
      async () => {
        const ws = await api.workspaces.get({ params: { id: wsId } })
        expect(ws.agent?.background.map((b) => b.description)).toEqual([expect.stringContaining(`listen(${port})`)])
      },
      { timeout: 60_000, interval: 250 },
    )
    const between = { answers: upstream.answers.length, requests: upstream.requests.length }

    // Two: three calls of its own, and the agent's answer to the notice made in it, on its account.
    const two = await run(`Check. ${bash(getServer(port))} ${bash(AGENT_PID)} [[berth:text Checked.]] ${SMALL}`)
    // Nothing reached the model between the tasks.
    expect(between).toEqual(afterOne)
    expect(two.task.status, JSON.stringify(two.task.error)).toBe('completed')
    const outputs = await toolOutputs(api, two.task.task_id)
    expect(outputs).toContain(SERVED)
    expect(outputs.filter((o) => o.startsWith('agent-pid:'))).toEqual([pid])
    const notices = two.requests.filter((r) => JSON.stringify(r.body).includes('<task-notification>'))
    expect(notices.length).toBeGreaterThan(0)
    // With one's, over its $0.50: each task is held to its own.
    expect(priced(one.answers) + priced(two.answers)).toBeGreaterThan(BUDGET)
    expectPaid(two)
    expect((await usageTotal()).cost_usd).toBeCloseTo(priced([...one.answers, ...two.answers]), 6)

    // Three: calls of $0.27 until its own budget is spent.
    const three = await run(`Spend. [[berth:turns 4]] ${LARGE}`)
    expect(three.task).toMatchObject({ status: 'failed', error: { code: 'BUDGET_EXCEEDED' } })
    expect(three.answers.length).toBeLessThan(5)
    expect(three.task.result!.cost_usd).toBeGreaterThanOrEqual(BUDGET)
    expect(three.task.result!.cost_usd).toBeLessThan(BUDGET + 0.27)
    expectPaid(three)

    // Four: the agent lived through it, and a task under its budget completes.
    const four = await run(`Again. ${bash(AGENT_PID)} [[berth:text Fine.]] ${SMALL}`)
    expect(four.task.status, JSON.stringify(four.task.error)).toBe('completed')
    expect((await toolOutputs(api, four.task.task_id)).filter((o) => o.startsWith('agent-pid:'))).toEqual([pid])
    expectPaid(four)
    const all = [one, two, three, four].flatMap((r) => r.answers)
    expect(upstream.answers).toHaveLength(all.length)
    expect(await usageTotal()).toMatchObject({
      tasks: 4,
      model_calls: all.length,
      cost_usd: expect.closeTo(priced(all), 6),
    })
  }, 900_000)
})
