/**
 * A run's tokens and cost are its own model calls, also when it resumes a conversation
 * (the SDK's `total_cost_usd` carries on from the conversation's saved total, so each
 * session follow-up used to report every earlier prompt's spend again). The bundled runner
 * on the host: with the offline model it serves itself (`stub`), and with an Anthropic
 * endpoint reached directly (no broker), here an offline model on this machine whose own
 * record of the answers it gave is what the runner's figures are checked against.
 */
import { costOf, type RunnerInput } from '@berth/contract'
import { startOfflineModel, type OfflineModelServer, type RecordedAnswer } from '@berth/stub-model'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeInput, runRunner, type Result, type RunOutcome } from './helpers.js'

const SPEND = '[[berth:usage input=10000 output=1000]]'
const MODEL = 'claude-sonnet-4-5'

/** What the answers cost at the contract's prices. */
const priced = (answers: readonly RecordedAnswer[]) =>
  answers.reduce(
    (sum, a) => sum + costOf(a.model, { ...a.usage, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }),
    0,
  )

/** The run's model calls as its transcript shows them (one turn per call of the main agent). */
const turns = (run: RunOutcome) => run.events.filter((e) => e.type === 'turn_start').length

/** Prompts of one conversation, in one workspace, each resuming the one before; `each` runs before each. */
async function conversation(
  prompts: string[],
  overrides: Partial<RunnerInput> = {},
  each?: () => void,
): Promise<Result[]> {
  const results: Result[] = []
  let resume: string | null = null
  let cwd: string | undefined
  for (const [i, prompt] of prompts.entries()) {
    each?.()
    const input = makeInput(prompt, { ...overrides, ...(cwd && { cwd }), resume, task_id: `t${i}` })
    cwd = input.cwd
    const run = await runRunner(input)
    expect(run.result?.outcome, run.stderr).toBe('success')
    expect(run.result!.turns).toBe(turns(run))
    results.push(run.result!)
    resume = run.result!.session_id
  }
  return results
}

describe('a run’s usage', () => {
  it('stub: each prompt of a resumed conversation reports only its own calls, as the offline model answered them', async () => {
    const results = await conversation([`One. ${SPEND}`, `Two. ${SPEND}`, `Three. ${SPEND} [[berth:turns 1]]`])
    const oneCall = costOf(MODEL, {
      input_tokens: 10_000,
      output_tokens: 1000,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    })
    // Every answer of a prompt reported 10,000 in and 1,000 out: a call per turn, and nothing of the prompts before.
    expect(results.map((r) => [r.turns, r.input_tokens, r.output_tokens])).toEqual([
      [1, 10_000, 1000],
      [1, 10_000, 1000],
      [2, 20_000, 2000],
    ])
    expect(results.map((r) => r.cost_usd)).toEqual([
      expect.closeTo(oneCall, 9),
      expect.closeTo(oneCall, 9),
      expect.closeTo(2 * oneCall, 9),
    ])
    for (const r of results)
      expect(r.model_usage).toEqual([
        {
          model: MODEL,
          calls: r.turns,
          input_tokens: 10_000 * r.turns,
          output_tokens: 1000 * r.turns,
          cache_read_tokens: 0,
          cache_write_tokens: 0,
          cost_usd: expect.closeTo(oneCall * r.turns, 9),
        },
      ])
  })

  it('stub: a subagent’s calls count too (the offline model answers them; the SDK does not stream them)', async () => {
    const run = await runRunner(
      makeInput(
        `Delegate. ${SPEND} [[berth:tool Agent {"description":"look","prompt":"Look around.","subagent_type":"general-purpose"}]] [[berth:text Delegated.]]`,
        { allowed_tools: ['Agent', 'Task', 'Bash'] },
      ),
    )
    expect(run.result?.outcome, run.stderr).toBe('success')
    const calls = run.result!.model_usage!.reduce((n, m) => n + m.calls, 0)
    expect(calls).toBeGreaterThan(turns(run))
    expect(run.result!.cost_usd).toBeCloseTo(
      run.result!.model_usage!.reduce((n, m) => n + m.cost_usd, 0),
      9,
    )
  })

  describe('an Anthropic endpoint without the broker', () => {
    let upstream: OfflineModelServer
    beforeAll(async () => {
      upstream = await startOfflineModel({ apiKey: 'sk-ant-direct-usage' })
    })
    afterAll(async () => {
      await upstream?.close()
    })

    it('each prompt of a resumed conversation costs what the endpoint answered it, at the contract’s prices', async () => {
      const model = {
        provider: 'anthropic' as const,
        model: MODEL,
        base_url: upstream.url,
        api_key: 'sk-ant-direct-usage',
      }
      const marks: number[] = []
      const prompts = [`One. ${SPEND}`, `Two. ${SPEND} [[berth:turns 1]]`, 'Three.']
      const results = await conversation(prompts, { model }, () => marks.push(upstream.answers.length))
      marks.push(upstream.answers.length)
      const answered = results.map((_, i) => upstream.answers.slice(marks[i], marks[i + 1]))
      expect(results.map((r) => r.cost_usd)).toEqual(answered.map((a) => expect.closeTo(priced(a), 9)))
      expect(results.map((r) => r.output_tokens)).toEqual(
        answered.map((a) => a.reduce((n, x) => n + x.usage.output_tokens, 0)),
      )
      expect(results.map((r) => r.turns)).toEqual(answered.map((a) => a.length))
      expect(results.map((r) => r.model_usage?.reduce((n, m) => n + m.calls, 0))).toEqual(answered.map((a) => a.length))
    })
  })
})
