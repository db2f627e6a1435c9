/**
 * The usage ledger over a store in a Map whose reads and writes yield between themselves (as
 * a network store's do): two instances' ledgers record calls at once and lose none; the
 * report groups by day, profile and model and refuses bad ranges; limits answer from the
 * sum of every instance; a task's end counts its own calls once: the gateway's where it
 * served the run (whatever the runner says), else the runner's, recorded as calls.
 */
import { describe, expect, it } from 'vitest'
import { isApiError, type UsageReport } from '@berth/contract'
import { manualClock } from '../src/ports/clock.js'
import type { Store } from '../src/ports/store.js'
import { endOf, type ResultEvent, type TaskEnd } from '../src/tasks/task.js'
import { Budgets, UsageLedger, settleUsage, usageReport } from '../src/usage/index.js'
import { countingStore, quietLogger, taskRecord } from './task-fakes.js'

const NOW = Date.parse('2026-11-20T12:00:00Z')

/** The Map store, every read and write a few turns of the event loop late. */
function slowStore(): Store {
  const s = countingStore()
  const later = () => new Promise((r) => setImmediate(r))
  return {
    ...s,
    get: async (key) => {
      const v = await s.get(key)
      await later()
      return v as never
    },
    set: async (key, value) => {
      await later()
      await s.set(key, value)
    },
  }
}

const call = (cost: number, model = 'claude-sonnet-4-5') => ({
  model,
  input_tokens: 100,
  output_tokens: 10,
  cache_creation_input_tokens: 2,
  cache_read_input_tokens: 1,
  cost_usd: cost,
})

function setup() {
  const store = slowStore()
  const clock = manualClock(NOW)
  const ledger = (instanceId: string) => new UsageLedger({ store, clock, logger: quietLogger, instanceId })
  return { store, clock, ledger }
}

async function report(ledger: UsageLedger, q: Partial<Parameters<typeof usageReport>[2]>): Promise<UsageReport> {
  return usageReport(ledger, NOW, { group_by: 'day', ...q })
}

describe('usage ledger', () => {
  it('loses no update when two instances record many calls at once, and each reads the sum', async () => {
    const { ledger } = setup()
    const a = ledger('inst:a')
    const b = ledger('inst-b')
    const subject = { owner_id: 'usr_1', task_id: 'task_1', profile_id: 'prof_1' }
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).recordCall(subject, call(0.001 * ((i % 3) + 1)))),
    )
    const expected = Array.from({ length: 40 }, (_, i) => 0.001 * ((i % 3) + 1)).reduce((x, y) => x + y, 0)
    for (const l of [a, b]) {
      expect((await l.monthSpend('usr_1')).cost_usd).toBeCloseTo(expected, 9)
      expect((await l.monthSpend('usr_1')).profiles).toEqual({ prof_1: expect.closeTo(expected, 9) })
      expect(await l.taskUsage('task_1')).toMatchObject({ requests: 40, input_tokens: 4000, cache_read_tokens: 40 })
    }
    const r = await report(a, { owner: 'usr_1' })
    expect(r.total).toMatchObject({ model_calls: 40, input_tokens: 4000, output_tokens: 400, cache_write_tokens: 80 })
  })

  it('groups by day, profile and model, per caller, and never mixes in another caller', async () => {
    const { ledger, clock } = setup()
    const l = ledger('inst-a')
    const mine = (task: string, profile: string) => ({ owner_id: 'usr_1', task_id: task, profile_id: profile })
    await l.recordCall(mine('task_1', 'prof_1'), call(0.01))
    await l.recordTaskEnd(mine('task_1', 'prof_1'), { model: 'claude-sonnet-4-5', seconds: 4 })
    clock.set(NOW + 86_400_000)
    await l.recordCall(mine('task_2', 'prof_2'), call(0.02, 'claude-haiku-4-5'))
    await l.recordTaskEnd(mine('task_2', 'prof_2'), { model: 'claude-haiku-4-5', seconds: 6 })
    // A task the gateway did not serve: its runner's three calls, recorded at its end.
    await l.recordCall(mine('task_3', 'prof_2'), { ...call(0.5, 'default'), input_tokens: 5, output_tokens: 6 }, 3)
    await l.recordTaskEnd(mine('task_3', 'prof_2'), { model: 'default', seconds: 1 })
    await l.recordCall({ owner_id: 'usr_2', task_id: 'task_9', profile_id: 'prof_9' }, call(7))

    const byDay = await report(l, { owner: 'usr_1', from: '2026-11-01', to: '2026-11-30' })
    expect(byDay.groups.map((g) => [g.key, g.tasks, g.cost_usd])).toEqual([
      ['2026-11-20', 1, 0.01],
      ['2026-11-21', 2, 0.52],
    ])
    const byProfile = await report(l, { owner: 'usr_1', group_by: 'profile', from: '2026-11-01', to: '2026-11-30' })
    expect(byProfile.groups.map((g) => [g.key, g.tasks, g.task_seconds])).toEqual([
      ['prof_2', 2, 7],
      ['prof_1', 1, 4],
    ])
    const byModel = await report(l, { owner: 'usr_1', group_by: 'model', from: '2026-11-01', to: '2026-11-30' })
    expect(byModel.groups.map((g) => g.key)).toEqual(['default', 'claude-haiku-4-5', 'claude-sonnet-4-5'])
    expect(byModel.total).toMatchObject({ tasks: 3, model_calls: 5, cost_usd: 0.53 })
    expect(JSON.stringify([byDay, byProfile, byModel])).not.toContain('usr_2')
    // The range counts: the 21st alone.
    expect((await report(l, { owner: 'usr_1', from: '2026-11-21', to: '2026-11-21' })).total.tasks).toBe(2)
    // Everyone (the operator's view): both callers, one row each per group.
    const all = await report(l, { group_by: 'profile', from: '2026-11-01', to: '2026-11-30' })
    expect(all.groups.map((g) => [g.user_id, g.key])).toContainEqual(['usr_2', 'prof_9'])
  })

  it('refuses a range that ends before it starts or spans over 366 days (400)', async () => {
    const { ledger } = setup()
    const l = ledger('inst-a')
    for (const q of [
      { from: '2026-11-02', to: '2026-11-01' },
      { from: '2024-01-01', to: '2026-01-01' },
    ]) {
      const err = await report(l, q).then(
        () => null,
        (e: unknown) => e,
      )
      expect(isApiError(err) && err.status).toBe(400)
    }
    // The default range: this month so far.
    expect(await report(l, {})).toMatchObject({ from: '2026-11-01', to: '2026-11-20' })
  })
})

describe('monthly limits', () => {
  it('answer from every instance’s spend this month, the caller’s limit before the profile’s', async () => {
    const { store, clock, ledger } = setup()
    const a = ledger('inst-a')
    const b = ledger('inst-b')
    const budgets = new Budgets({ store, clock, ledger: b })
    const profile = { id: 'prof_1', monthly_budget_usd: 0.04 }
    await budgets.set('usr_1', 0.05)
    expect(await budgets.exceeded('usr_1', profile)).toBeNull()
    await a.recordCall({ owner_id: 'usr_1', task_id: 't1', profile_id: 'prof_1' }, call(0.03))
    expect(await budgets.exceeded('usr_1', profile)).toBeNull()
    // Spent on instance B, for another profile: the caller's $0.05 is spent, the profile's $0.04 not.
    await b.recordCall({ owner_id: 'usr_1', task_id: 't2', profile_id: 'prof_2' }, call(0.03))
    const over = await budgets.exceeded('usr_1', profile)
    expect(over).toEqual({
      scope: 'user',
      limit: 0.05,
      spent: expect.closeTo(0.06, 9),
      resets_at: '2026-12-01T00:00:00.000Z',
    })
    await budgets.set('usr_1', null)
    expect(await budgets.exceeded('usr_1', profile)).toBeNull()
    await a.recordCall({ owner_id: 'usr_1', task_id: 't1', profile_id: 'prof_1' }, call(0.01))
    expect(await budgets.exceeded('usr_1', profile)).toMatchObject({ scope: 'profile', limit: 0.04 })
    const err = await budgets.assertWithin('usr_1', profile).then(
      () => null,
      (e: unknown) => e,
    )
    expect(isApiError(err) && [err.status, err.code, err.details]).toEqual([
      402,
      'BUDGET_EXCEEDED',
      { scope: 'profile', limit: 0.04, spent: expect.closeTo(0.04, 9), resets_at: '2026-12-01T00:00:00.000Z' },
    ])
    // Next month starts from zero.
    clock.set(Date.parse('2026-12-01T00:00:00Z'))
    expect(await budgets.exceeded('usr_1', profile)).toBeNull()
  })
})

describe('a task’s end', () => {
  const runnerSaid: TaskEnd = {
    status: 'completed',
    result: { text: 'done', tool_calls: [], input_tokens: 0, output_tokens: 0, cost_usd: 0, turns: 2 },
  }
  /** A runner's result line: its own calls of `groups`, summed on top as the runner does. */
  const runnerResult = (groups: NonNullable<ResultEvent['model_usage']>): ResultEvent => ({
    type: 'result',
    outcome: 'success',
    text: 'done',
    tool_calls: [],
    input_tokens: groups.reduce((n, g) => n + g.input_tokens + g.cache_read_tokens + g.cache_write_tokens, 0),
    output_tokens: groups.reduce((n, g) => n + g.output_tokens, 0),
    cost_usd: groups.reduce((n, g) => n + g.cost_usd, 0),
    model_usage: groups,
    turns: 2,
    session_id: null,
    error: null,
  })
  const group = (model: string, calls: number, cost: number) => ({
    model,
    calls,
    input_tokens: 1000 * calls,
    output_tokens: 100 * calls,
    cache_read_tokens: 10 * calls,
    cache_write_tokens: 1 * calls,
    cost_usd: cost,
  })

  it('takes the gateway’s tokens and cost over what the runner reported, and counts the task once', async () => {
    const { ledger } = setup()
    const l = ledger('inst-a')
    const task = taskRecord({ started_at: new Date(NOW - 5000).toISOString(), metered_by: 'gateway' })
    const subject = { owner_id: task.owner_id, task_id: task.id, profile_id: task.profile_id }
    await l.recordCall(subject, call(0.012))
    await l.recordCall(subject, call(0.008))
    const runner = runnerResult([group('claude-sonnet-4-5', 9, 4.5)])
    const end = await settleUsage({ ledger: l }, task, endOf(runner), { profile: null, endedAt: NOW, runner })
    expect(end.result).toMatchObject({ input_tokens: 206, output_tokens: 20, cost_usd: expect.closeTo(0.02, 9) })
    const r = await report(l, { owner: task.owner_id })
    expect(r.total).toMatchObject({ tasks: 1, task_seconds: 5, model_calls: 2, cost_usd: 0.02 })
  })

  it('a run the gateway served but never metered cost nothing, whatever its runner says', async () => {
    const { ledger } = setup()
    const l = ledger('inst-a')
    const task = taskRecord({ started_at: new Date(NOW - 1000).toISOString(), metered_by: 'gateway' })
    const runner = runnerResult([group('claude-sonnet-4-5', 3, 0.7)])
    const end = await settleUsage({ ledger: l }, task, endOf(runner), { profile: null, endedAt: NOW, runner })
    expect(end.result).toMatchObject({ input_tokens: 0, output_tokens: 0, cost_usd: 0 })
    expect((await report(l, { owner: task.owner_id })).total).toMatchObject({ tasks: 1, model_calls: 0, cost_usd: 0 })
  })

  it('without the gateway, records the runner’s own calls by model once, and the result carries their sums', async () => {
    const { ledger } = setup()
    const l = ledger('inst-a')
    const task = taskRecord({ started_at: new Date(NOW - 1000).toISOString(), metered_by: 'runner' })
    const runner = runnerResult([group('claude-sonnet-4-5', 2, 0.06), group('claude-haiku-4-5', 1, 0.01)])
    const end = await settleUsage({ ledger: l }, task, endOf(runner), { profile: null, endedAt: NOW, runner })
    expect(end.result).toMatchObject({ input_tokens: 3033, output_tokens: 300, cost_usd: expect.closeTo(0.07, 9) })
    const byModel = await report(l, { owner: task.owner_id, group_by: 'model' })
    expect(byModel.groups.map((g) => [g.key, g.model_calls, g.cost_usd])).toEqual([
      ['claude-sonnet-4-5', 2, 0.06],
      ['claude-haiku-4-5', 1, 0.01],
    ])
    expect(byModel.total).toMatchObject({ tasks: 1, model_calls: 3, input_tokens: 3000, cache_read_tokens: 30 })
    expect((await l.monthSpend(task.owner_id)).cost_usd).toBeCloseTo(0.07, 9)
  })

  it('ends BUDGET_EXCEEDED when the gateway cut it at a spent limit', async () => {
    const { store, clock, ledger } = setup()
    const l = ledger('inst-a')
    const budgets = new Budgets({ store, clock, ledger: l })
    const failed: TaskEnd = { ...runnerSaid, status: 'failed', error: { code: 'MODEL_ERROR', error: '400' } }
    const own = taskRecord({ started_at: new Date(NOW).toISOString(), max_budget_usd: 0.01, metered_by: 'gateway' })
    await l.recordCall({ owner_id: own.owner_id, task_id: own.id, profile_id: own.profile_id }, call(0.011))
    const end = await settleUsage({ ledger: l, budgets }, own, failed, { profile: null, endedAt: NOW })
    expect(end).toMatchObject({ status: 'failed', error: { code: 'BUDGET_EXCEEDED' }, result: { text: 'done' } })

    const monthly = taskRecord({ started_at: new Date(NOW).toISOString(), owner_id: 'usr_m', metered_by: 'gateway' })
    await l.recordCall({ owner_id: 'usr_m', task_id: monthly.id, profile_id: monthly.profile_id }, call(0.03))
    const profile = { model: null, monthly_budget_usd: 0.02 }
    const cut = await settleUsage({ ledger: l, budgets }, monthly, failed, { profile, endedAt: NOW })
    expect(cut.error).toMatchObject({ code: 'BUDGET_EXCEEDED', error: expect.stringMatching(/profile's monthly/) })
    // A model error with room left stays a model error.
    const roomy = { model: null, monthly_budget_usd: 1 }
    expect(
      (await settleUsage({ ledger: l, budgets }, monthly, failed, { profile: roomy, endedAt: NOW })).error,
    ).toEqual(failed.error)
  })
})
