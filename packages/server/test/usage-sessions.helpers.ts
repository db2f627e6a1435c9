/**
 * The session-and-fork cost scenario every runtime runs (issue 41): three prompts of one
 * session, a fork, a prompt in the fork and a failing follow-up, each task's tokens and
 * cost checked against the model calls it made, and the caller's usage and spend against
 * the sum of the tasks. Two ways to reach the model: an Anthropic credential through the
 * model gateway to an offline model on this machine (whose own record of the answers it
 * gave is the reference), and the `stub` provider served by the runner (every answer
 * reports the prompt's `[[berth:usage]]`, and the transcript shows each call as a turn).
 */
import { costOf, type Task } from '@berth/core'
import type { OfflineModelServer, RecordedAnswer } from '@berth/stub-model'
import { expect } from 'vitest'
import { ADMIN_TOKEN, clientFor, waitForTask, type TestServer } from './helpers.js'

export const USAGE_MODEL = 'claude-sonnet-4-5'
export const USAGE_MODEL_KEY = 'sk-ant-api03-SESSIONS-USAGE-7c1e'
const SPEND = '[[berth:usage input=10000 output=1000]]'

const priced = (answers: readonly RecordedAnswer[]) =>
  answers.reduce(
    (sum, a) => sum + costOf(a.model, { ...a.usage, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }),
    0,
  )

/** One task and the model calls it made by the reference's count. */
interface Counted {
  task: Task
  calls: number
  input_tokens: number
  output_tokens: number
  cost_usd: number
}

/**
 * Run the scenario as a new caller of `s`, through the gateway to `upstream` or on the
 * `stub` provider, and check every figure. `waitMs` bounds each task.
 */
export async function sessionAndForkCosts(
  s: TestServer,
  via: { gateway: OfflineModelServer } | 'stub',
  waitMs = 120_000,
): Promise<void> {
  const { token, id } = await s.user(`usage-${via === 'stub' ? 'stub' : 'gateway'}`)
  const api = clientFor(s, token)
  const key =
    via === 'stub'
      ? await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
      : await api.apiKeys.create({
          body: { name: 'metered', provider: 'anthropic', key: USAGE_MODEL_KEY, base_url: via.gateway.url },
        })
  const profile = await api.profiles.create({
    body: { name: 'Costs', slug: 'costs', api_key_id: key.id, default_tools: ['Bash'], model: USAGE_MODEL },
  })
  const events = async (taskId: string) =>
    (await api.tasks.events({ params: { id: taskId }, query: { limit: 100 } })).events

  /** Run one session prompt and count its calls by the reference. */
  const run = async (prompt: string, session_id?: string): Promise<Counted> => {
    const before = via === 'stub' ? 0 : via.gateway.answers.length
    const submitted = await api.tasks.submit({
      body: { mode: 'session', profile_id: profile.id, prompt, ...(session_id && { session_id }) },
    })
    const task = await waitForTask(api, submitted.task_id, { timeout: waitMs })
    const turns = (await events(task.task_id)).filter((e) => e.type === 'turn_start').length
    if (via !== 'stub') {
      const answered = via.gateway.answers.slice(before)
      const input = answered.reduce((n, a) => n + a.usage.input_tokens, 0)
      const output = answered.reduce((n, a) => n + a.usage.output_tokens, 0)
      return { task, calls: answered.length, input_tokens: input, output_tokens: output, cost_usd: priced(answered) }
    }
    // Every answer of a stub task reports the prompt's usage directive (none when the call failed).
    const one = {
      input_tokens: 10_000,
      output_tokens: 1000,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    }
    const calls = task.status === 'completed' ? turns : 0
    return {
      task,
      calls,
      input_tokens: 10_000 * calls,
      output_tokens: 1000 * calls,
      cost_usd: costOf(USAGE_MODEL, one) * calls,
    }
  }

  const one = await run(`One. ${SPEND}`)
  expect(one.task.status, JSON.stringify(one.task.error)).toBe('completed')
  const session = one.task.session_id!
  const two = await run(`Two. ${SPEND} [[berth:turns 1]]`, session)
  const three = await run(`Three. ${SPEND}`, session)
  const workspace = one.task.workspace_id!
  const fork = await api.workspaces.fork({ params: { id: workspace }, body: {} })
  const forked = await run(`Forked. ${SPEND}`, fork.session_id)
  expect(forked.task.workspace_id).toBe(fork.id)
  // A follow-up whose model call fails made no call that answered: it costs nothing.
  const failing = await run(`Four. [[berth:error invalid]]`, session)
  expect(failing.task.status).toBe('failed')
  const counted = [one, two, three, forked, failing]
  for (const c of [one, two, three, forked]) expect(c.task.status, JSON.stringify(c.task.error)).toBe('completed')
  expect([one, two, three, forked].map((c) => c.calls)).toEqual([1, 2, 1, 1])
  expect(failing.calls).toBe(0)

  // Each task: its own calls' tokens and cost, in its result and in its transcript's result line.
  for (const c of counted) {
    const r = c.task.result!
    expect([r.input_tokens, r.output_tokens], c.task.task_id).toEqual([c.input_tokens, c.output_tokens])
    expect(r.cost_usd, c.task.task_id).toBeCloseTo(c.cost_usd, 9)
  }
  for (const c of [one, two, three, forked]) {
    const line = (await events(c.task.task_id)).find((e) => e.type === 'result')
    expect(line, c.task.task_id).toMatchObject({ cost_usd: expect.closeTo(c.cost_usd, 9) })
  }

  // The caller's usage, grouped every way, the operator's view and the month's spend: the tasks' sums.
  const sum = (f: (c: Counted) => number) => counted.reduce((n, c) => n + f(c), 0)
  const total = {
    tasks: counted.length,
    model_calls: sum((c) => c.calls),
    input_tokens: sum((c) => c.input_tokens),
    output_tokens: sum((c) => c.output_tokens),
    cost_usd: expect.closeTo(
      sum((c) => c.task.result!.cost_usd),
      6,
    ),
  }
  for (const group_by of ['day', 'profile', 'model'] as const) {
    const report = await api.usage.get({ query: { group_by } })
    expect(report.total, group_by).toMatchObject(total)
    expect(report.groups.reduce((n, g) => n + g.cost_usd, 0)).toBeCloseTo(report.total.cost_usd, 6)
  }
  const admin = clientFor(s, ADMIN_TOKEN)
  expect((await admin.admin.usage({ query: { user_id: id, group_by: 'model' } })).total).toMatchObject(total)
  expect((await admin.admin.limits.get({ params: { id } })).spent_usd).toBeCloseTo(
    sum((c) => c.cost_usd),
    6,
  )
}
