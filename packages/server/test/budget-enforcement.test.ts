/**
 * Budgets hold during model calls, end to end (issue 41, FINDINGS 16): tasks on the `local`
 * runtime (bubblewrap) with the real runner and Claude Code, on an `anthropic` credential
 * whose `base_url` is the offline model, so every model call crosses Berth's gateway. The
 * agent's Bash call sends model calls straight to `$ANTHROPIC_BASE_URL` with its token (or
 * Claude Code's own call is the dear one), each asking the model to report a million input
 * tokens and 100,000 output tokens (claude-sonnet-4-5: $3 + $1.50 = $4.50 a call) and to
 * stream slowly. Each task must end BUDGET_EXCEEDED within 10 % of its budget plus one
 * call's price, below what one whole call costs, however many calls the agent runs at once.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger, type Task } from '@berth/core'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

const MODEL_KEY = 'sk-ant-api03-BUDGETKEY-3k9d7f1a5s2g8h4j'
const CALL_USD = 4.5
const BUDGET = 0.5

/**
 * The agent's Bash command: `calls` streamed model calls at once through the gateway, each
 * line of output one call's status and whether its answer was cut. The script goes in
 * base64 so that its directives are not read as the task prompt's own.
 */
function bashCalls(calls: number): string {
  const directive = (d: string) => `${'['.repeat(2)}berth:${d}${']'.repeat(2)}`
  const prompt = `${directive('usage input=1000000 output=100000')} ${directive('slow 3000')}`
  const script = `
    const body = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 1024, stream: true,
      messages: [{ role: 'user', content: ${JSON.stringify(prompt)} }] })
    const one = () => fetch(process.env.ANTHROPIC_BASE_URL + '/v1/messages', { method: 'POST', body,
      headers: { 'x-api-key': process.env.ANTHROPIC_API_KEY, 'content-type': 'application/json' } })
      .then(async (r) => r.status + (/event: error/.test(await r.text()) ? ' cut' : ''), (e) => 'failed ' + e)
    Promise.all(Array.from({ length: ${calls} }, one)).then((a) => console.log(a.join('\\n')))`
  return `node -e "eval(Buffer.from('${Buffer.from(script).toString('base64')}', 'base64').toString())"`
}

const dir = mkdtempSync(join(tmpdir(), 'berth-budget-'))
const pool = uniquePoolName('budget-local')
const runtime = localRuntime({ baseDir: join(dir, 'local'), logger: silentLogger, sandbox: 'bwrap' })
let upstream: OfflineModelServer
let s: TestServer

beforeAll(async () => {
  upstream = await startOfflineModel({ apiKey: MODEL_KEY })
  s = await startServer({
    dataDir: join(dir, 'data'),
    runtime,
    pool: { image: 'local', min: 0, max: 3, name: pool },
    runner: { bundleDir: RUNNER_BUNDLE },
    // The fake provider listens on loopback.
    allowPrivateWebhooks: true,
  })
  await s.berth.ready
}, 120_000)
afterAll(async () => {
  await s?.close()
  await upstream?.close()
  await sweep(runtime, pool)
  rmSync(dir, { recursive: true, force: true })
})

/** A caller with a metered credential and a profile (with `monthly_budget_usd` when given). */
async function caller(name: string, monthly?: number) {
  const { token } = await s.user(name)
  const api = clientFor(s, token)
  const key = await api.apiKeys.create({
    body: { name: 'metered', provider: 'anthropic', key: MODEL_KEY, base_url: upstream.url },
  })
  const profile = await api.profiles.create({
    body: {
      name: 'Spender',
      slug: 'spender',
      api_key_id: key.id,
      default_tools: ['Bash'],
      model: 'claude-sonnet-4-5',
      monthly_budget_usd: monthly,
    },
  })
  const run = async (calls: number | string, max_budget_usd?: number): Promise<Task> => {
    const prompt =
      typeof calls === 'string'
        ? calls
        : `Spend. [[berth:tool Bash ${JSON.stringify({ command: bashCalls(calls) })}]] [[berth:text Spent.]]`
    const body = { mode: 'batch' as const, profile_id: profile.id, prompt, max_budget_usd }
    return waitForTask(api, (await api.tasks.submit({ body })).task_id, { timeout: 180_000 })
  }
  return { api, run }
}

/** What the agent's Bash call printed: one line per model call. */
async function bashOutput(api: ReturnType<typeof clientFor>, taskId: string): Promise<string[]> {
  const { events } = await api.tasks.events({ params: { id: taskId }, query: { limit: 100 } })
  const output = String(events.find((e) => e.type === 'tool_result')?.output ?? '')
  return output.split('\n').filter(Boolean)
}

describe('budgets during model calls (local runtime)', () => {
  it("one dear call: the task ends BUDGET_EXCEEDED at its budget, well below the call's price", async () => {
    const ada = await caller('Ada')
    const task = await ada.run(1, BUDGET)
    expect([task.status, task.error?.code], JSON.stringify(task.error)).toEqual(['failed', 'BUDGET_EXCEEDED'])
    const cost = task.result!.cost_usd
    expect(cost).toBeGreaterThanOrEqual(BUDGET)
    expect(cost).toBeLessThan(CALL_USD)
    expect(cost).toBeLessThanOrEqual(BUDGET * 1.1 + CALL_USD)
    expect(await bashOutput(ada.api, task.task_id)).toEqual(['200 cut'])
  }, 240_000)

  it("the agent's own dear call: cut mid-stream, Claude Code stops and the task ends BUDGET_EXCEEDED", async () => {
    const dee = await caller('Dee')
    const before = upstream.requests.length
    const task = await dee.run(
      'Answer. [[berth:usage input=1000000 output=100000]] [[berth:slow 3000]] [[berth:text Hi.]]',
      BUDGET,
    )
    expect([task.status, task.error?.code], JSON.stringify(task.error)).toEqual(['failed', 'BUDGET_EXCEEDED'])
    expect(task.result!.cost_usd).toBeGreaterThanOrEqual(BUDGET)
    expect(task.result!.cost_usd).toBeLessThan(CALL_USD)
    // Its retries (if any) were refused by the gateway: the provider saw the dear call once.
    const dear = upstream.requests.slice(before).filter((r) => JSON.stringify(r.body).includes('input=1000000'))
    expect(dear).toHaveLength(1)
  }, 240_000)

  it('six dear calls at once: one runs and is cut, the others are refused; the same bound holds', async () => {
    const bob = await caller('Bob')
    const task = await bob.run(6, BUDGET)
    expect([task.status, task.error?.code], JSON.stringify(task.error)).toEqual(['failed', 'BUDGET_EXCEEDED'])
    const cost = task.result!.cost_usd
    expect(cost).toBeGreaterThanOrEqual(BUDGET)
    expect(cost).toBeLessThanOrEqual(BUDGET * 1.1 + CALL_USD)
    expect((await bashOutput(bob.api, task.task_id)).sort()).toEqual(['200 cut', '400', '400', '400', '400', '400'])
  }, 240_000)

  it("six dear calls at once under a profile's monthly limit: the month's spend holds the same bound", async () => {
    const cyd = await caller('Cyd', BUDGET)
    const task = await cyd.run(6)
    expect([task.status, task.error?.code], JSON.stringify(task.error)).toEqual(['failed', 'BUDGET_EXCEEDED'])
    expect(task.error!.error).toMatch(/profile's monthly spending limit of \$0.5/)
    const month = (await cyd.api.usage.get({ query: {} })).total.cost_usd
    expect(month).toBeGreaterThanOrEqual(BUDGET)
    expect(month).toBeLessThanOrEqual(BUDGET * 1.1 + CALL_USD)
    expect((await bashOutput(cyd.api, task.task_id)).sort()).toEqual(['200 cut', '400', '400', '400', '400', '400'])
  }, 240_000)
})
