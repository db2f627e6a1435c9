/**
 * Budgets held during model calls (issue 41): the model gateway on a real unix socket in
 * front of the offline model, which streams the usage its prompt asks for. A streamed
 * answer is metered as it passes and ended with an `error` event at the first event past
 * what is left; calls of one task (or of one caller, for a monthly limit) running at once
 * hold parts of one remainder, so together they pass a limit by one call's granularity at
 * most. Prices are claude-sonnet-4-5's: $3 per million input tokens, $15 per million output.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { MonthlyLimit } from '@berth/core'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { startModelGateway, type GatewayGrant, type ModelGateway } from '../src/broker/model-gateway.js'

const REAL_KEY = 'sk-ant-api03-REALKEY-budget-test-0123456789'
/** FINDINGS 16: a million input tokens ($3) and 100,000 output tokens ($1.50), slowly. */
const DEAR = '[[berth:usage input=1000000 output=100000]] [[berth:slow 3000]]'
const DEAR_CALL = 4.5
/** An honest call: 2,000 input tokens ($0.006) and 500 output tokens ($0.0075). */
const CHEAP = '[[berth:usage input=2000 output=500]] [[berth:text A short answer.]]'
const CHEAP_CALL = 0.0135

interface Reply {
  status: number
  text: string
}

function call(socketPath: string, token: string, prompt: string, stream = true): Promise<Reply> {
  const body = { model: 'claude-sonnet-4-5', max_tokens: 1024, stream, messages: [{ role: 'user', content: prompt }] }
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        path: '/v1/messages',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': token },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
}

const cut = (r: Reply) => r.status === 200 && r.text.includes('event: error') && !r.text.includes('message_stop')
const refused = (r: Reply) => r.status === 400 && /is spent/.test(JSON.parse(r.text).error.message)

let dir: string
let stub: OfflineModelServer
let gateway: ModelGateway
let grants: Map<string, () => GatewayGrant>
/** A fake of the shared usage ledger: what settled calls cost the caller, once "written". */
let ledger: number
let writeDelay: Promise<void>

function grant(taskId: string, over: Partial<GatewayGrant> = {}): GatewayGrant {
  return {
    task_id: taskId,
    owner_id: 'usr_1',
    profile_id: 'prof_1',
    upstream: { base_url: stub.url, api_key: REAL_KEY },
    allowed_models: null,
    max_budget_usd: null,
    monthly_limits: [],
    ...over,
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-gateway-budget-'))
  stub = await startOfflineModel({ apiKey: REAL_KEY })
})
afterAll(async () => {
  await stub.close()
  rmSync(dir, { recursive: true, force: true })
})
beforeEach(async () => {
  stub.requests.length = 0
  grants = new Map()
  ledger = 0
  writeDelay = Promise.resolve()
  gateway = await startModelGateway({
    socketPath: join(dir, 'model.sock'),
    authorize: async (token) => grants.get(token)?.() ?? null,
    // The ledger has a call once its write is done (held by `writeDelay` when a test says).
    onUsage: (_g, usage) =>
      writeDelay.then(() => {
        ledger += usage.cost_usd
      }),
  })
})
afterEach(async () => {
  await gateway.close()
})

describe("a task's budget", () => {
  it('ends one dear streamed call at the budget: well below what the whole call costs, the next call refused', async () => {
    grants.set('t1', () => grant('task_1', { max_budget_usd: 0.5 }))
    const r = await call(gateway.socketPath, 't1', `Spend. ${DEAR}`)
    expect(cut(r), r.text).toBe(true)
    expect(r.text).toMatch(/this task's budget of \$0.5 is spent/)
    const spent = gateway.usage('task_1')!.cost_usd
    expect(spent).toBeGreaterThanOrEqual(0.5)
    expect(spent).toBeLessThan(DEAR_CALL)
    expect(spent).toBeLessThanOrEqual(0.5 * 1.1 + DEAR_CALL)
    expect(refused(await call(gateway.socketPath, 't1', 'Again.'))).toBe(true)
    expect(stub.requests).toHaveLength(1)
  })

  it('cuts a long honest answer as its output streams: within 10 % of the budget', async () => {
    grants.set('t1', () => grant('task_1', { max_budget_usd: 0.01 }))
    // About 16,000 output tokens ($0.24) if streamed to the end; the provider reports them only there.
    // Streamed a few words at a time as a model does (what arrived in one read is billed, and counted, whole).
    const long = Array.from({ length: 8000 }, (_, i) => `word${i}`).join(' ')
    const r = await call(gateway.socketPath, 't1', `[[berth:usage input=100]] [[berth:slow 1]] [[berth:text ${long}]]`)
    expect(cut(r), r.text.slice(-500)).toBe(true)
    expect(r.text).toContain('word10 ')
    expect(r.text).not.toContain('word7999')
    const spent = gateway.usage('task_1')!.cost_usd
    expect(spent).toBeGreaterThanOrEqual(0.01)
    expect(spent).toBeLessThanOrEqual(0.01 * 1.1)
  })

  it('holds six dear streamed calls at once to one remainder: one runs and is cut, five are refused', async () => {
    grants.set('t1', () => grant('task_1', { max_budget_usd: 0.5 }))
    const replies = await Promise.all(Array.from({ length: 6 }, () => call(gateway.socketPath, 't1', DEAR)))
    expect(replies.filter(cut)).toHaveLength(1)
    expect(replies.filter(refused)).toHaveLength(5)
    expect(stub.requests).toHaveLength(1)
    const spent = gateway.usage('task_1')!.cost_usd
    expect(spent).toBeLessThanOrEqual(0.5 * 1.1 + DEAR_CALL)
  })

  it('holds six honest streamed calls at once to one remainder: the task ends within one call of its budget', async () => {
    grants.set('t1', () => grant('task_1', { max_budget_usd: 0.05 }))
    // Slow enough that all six are asked before the first answer ends.
    const slow = `${CHEAP} [[berth:slow 200]]`
    const replies = await Promise.all(Array.from({ length: 6 }, () => call(gateway.socketPath, 't1', slow)))
    const done = replies.filter((r) => r.status === 200 && r.text.includes('message_stop'))
    expect(done.length).toBeGreaterThanOrEqual(3)
    expect(done.length + replies.filter(cut).length + replies.filter(refused).length).toBe(6)
    const spent = gateway.usage('task_1')!.cost_usd
    expect(spent).toBeGreaterThanOrEqual(0.05)
    expect(spent).toBeLessThanOrEqual(0.05 * 1.1 + CHEAP_CALL)
  })

  it('runs calls at once while their worst cases fit: six slow streams are all under way together', async () => {
    // Each call's worst case is a full context window: 200,000 × $3.75 + 1024 × $15 per million, about $0.77.
    grants.set('t1', () => grant('task_1', { max_budget_usd: 10 }))
    let finished = 0
    const replies = Promise.all(
      Array.from({ length: 6 }, () =>
        call(gateway.socketPath, 't1', `${CHEAP} [[berth:slow 3000]]`).then((r) => {
          finished++
          return r
        }),
      ),
    )
    // The sixth reaches the provider while the first is still streaming (waiting 3 s before its text).
    await expect.poll(() => stub.requests.length, { timeout: 10_000 }).toBe(6)
    expect(finished).toBe(0)
    for (const r of await replies) expect(r.text).toContain('message_stop')
    expect(gateway.usage('task_1')!.cost_usd).toBeCloseTo(6 * CHEAP_CALL, 9)
  })
})

describe('monthly limits', () => {
  const monthly = (limit: number): MonthlyLimit[] => [
    { scope: 'user', limit, spent: ledger, resets_at: '2099-01-01T00:00:00.000Z' },
  ]

  it("hold two tasks' calls at once to the caller's remainder", async () => {
    grants.set('t1', () => grant('task_1', { monthly_limits: monthly(0.05) }))
    grants.set('t2', () => grant('task_2', { monthly_limits: monthly(0.05) }))
    const slow = `${CHEAP} [[berth:slow 200]]`
    const replies = await Promise.all(
      Array.from({ length: 6 }, (_, i) => call(gateway.socketPath, i % 2 ? 't1' : 't2', slow)),
    )
    const spent = gateway.usage('task_1')!.cost_usd + gateway.usage('task_2')!.cost_usd
    expect(spent).toBeGreaterThanOrEqual(0.05)
    expect(spent).toBeLessThanOrEqual(0.05 * 1.1 + CHEAP_CALL)
    expect(replies.filter(refused).length).toBeGreaterThanOrEqual(1)
    expect(refused(await call(gateway.socketPath, 't1', CHEAP))).toBe(true)
  })

  it('count a settled call until the ledger has written it', async () => {
    grants.set('t1', () => grant('task_1', { monthly_limits: monthly(0.02) }))
    let write!: () => void
    writeDelay = new Promise((resolve) => {
      write = resolve
    })
    expect((await call(gateway.socketPath, 't1', CHEAP)).text).toContain('message_stop')
    // The ledger still reads $0 spent: the gateway counts the first call ($0.0135) itself, and cuts the second.
    expect(ledger).toBe(0)
    const second = await call(gateway.socketPath, 't1', CHEAP)
    expect(cut(second), second.text).toBe(true)
    expect(second.text).toMatch(/the caller's monthly spending limit of \$0.02 is spent/)
    write()
    await expect.poll(() => ledger).toBeCloseTo(2 * CHEAP_CALL, 9)
    expect(refused(await call(gateway.socketPath, 't1', CHEAP))).toBe(true)
  })
})
