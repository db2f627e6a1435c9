import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { makeInput, parseLines, runRunner } from './helpers.js'

// The bundled runner as a child process on this machine, provider `stub`: the real Claude
// Agent SDK and Claude Code binary, talking to the offline model the runner serves itself.
describe('berth-runner on the host (stub provider)', () => {
  it('runs a Bash tool call and completes with text, tool calls, tokens, cost and turns', async () => {
    const input = makeInput(
      'Look around [[berth:tool Bash {"command":"echo berth-$((20+22))"}]] [[berth:text All done here.]]',
      {
        claude_md: 'Be brief.',
        memory: [{ type: 'fact', name: 'harbour', body: 'Berth 7 is free.' }],
        skills: [{ name: 'greet', description: 'Greets visitors', body: 'Say hello like a harbour master.' }],
      },
    )
    const run = await runRunner(input)
    expect(run.exitCode, run.stderr).toBe(0)
    const types = run.events.map((e) => e.type)
    expect(types[0]).toBe('user_message')
    expect(types.at(-1)).toBe('result')
    expect(types.filter((t) => t === 'result')).toHaveLength(1)
    expect(types.filter((t) => t === 'turn_start')).toHaveLength(2)
    expect(types.filter((t) => t === 'turn_end')).toHaveLength(2)
    expect(run.events[0]).toEqual({ type: 'user_message', text: input.prompt })

    const call = run.events.find((e) => e.type === 'tool_call')
    expect(call).toMatchObject({ name: 'Bash', input: { command: 'echo berth-$((20+22))' } })
    const result = run.events.find((e) => e.type === 'tool_result')
    expect(result).toMatchObject({ id: (call as { id: string }).id, output: 'berth-42', is_error: false })
    const tokens = run.events.filter((e) => e.type === 'token').map((e) => (e as { text: string }).text)
    expect(tokens.length).toBeGreaterThan(2)
    expect(tokens.join('')).toContain('All done here.')
    for (const e of run.events.filter((e) => e.type === 'turn_end')) {
      expect(e).toMatchObject({ input_tokens: expect.any(Number), output_tokens: expect.any(Number) })
      expect((e as { input_tokens: number }).input_tokens).toBeGreaterThan(0)
    }

    expect(run.result).toMatchObject({
      outcome: 'success',
      text: 'All done here.',
      tool_calls: [{ id: (call as { id: string }).id, name: 'Bash', input: { command: 'echo berth-$((20+22))' } }],
      turns: 2,
      error: null,
    })
    expect(run.result!.input_tokens).toBeGreaterThan(0)
    expect(run.result!.output_tokens).toBeGreaterThan(0)
    expect(run.result!.cost_usd).toBeGreaterThan(0)
    expect(run.result!.session_id).toMatch(/^[0-9a-f-]{36}$/)

    // The events file holds exactly the stdout lines; skills were written where the SDK finds them.
    expect(readFileSync(input.events_file, 'utf8')).toBe(run.lines.map((l) => `${l}\n`).join(''))
    expect(readFileSync(join(input.cwd, '.claude/skills/greet/SKILL.md'), 'utf8')).toContain(
      'Say hello like a harbour master.',
    )
    expect(existsSync(join(input.cwd, '.berth/claude/projects'))).toBe(true)
  })

  it('denies a tool outside allowed_tools without asking anyone (permission mode dontAsk)', async () => {
    const input = makeInput(
      'Write it [[berth:tool Write {"file_path":"/tmp/berth-denied.txt","content":"x"}]] [[berth:text Tried.]]',
      {
        allowed_tools: ['Read'],
      },
    )
    const run = await runRunner(input)
    expect(run.result).toMatchObject({ outcome: 'success', text: 'Tried.' })
    expect(run.events.find((e) => e.type === 'tool_result')).toMatchObject({ is_error: true })
  })

  it('stops at max_turns with outcome error_max_turns and the partial turns', async () => {
    const run = await runRunner(makeInput('Loop [[berth:turns 6]]', { max_turns: 2 }))
    expect(run.exitCode).toBe(0)
    expect(run.result).toMatchObject({
      outcome: 'error_max_turns',
      turns: 2,
      error: expect.stringContaining('maximum number of turns'),
    })
    expect(run.result!.tool_calls).toHaveLength(2)
    expect(run.result!.cost_usd).toBeGreaterThan(0)
  })

  it('stops at max_budget_usd with outcome error_max_budget_usd, keeping the partial cost', async () => {
    // 100k in + 10k out on Sonnet prices = $0.45 per turn: over $0.5 after the second.
    const run = await runRunner(
      makeInput('Spend [[berth:turns 6]] [[berth:usage input=100000 output=10000]]', { max_budget_usd: 0.5 }),
    )
    expect(run.exitCode).toBe(0)
    expect(run.result).toMatchObject({ outcome: 'error_max_budget_usd', error: expect.stringContaining('budget') })
    expect(run.result!.cost_usd).toBeGreaterThan(0.5)
    expect(run.result!.turns).toBeGreaterThanOrEqual(2)
    expect(run.result!.input_tokens).toBeGreaterThanOrEqual(200_000)
  })

  it.each(['overloaded', 'api', 'auth'])('a model API error (%s) ends with outcome model_error', async (kind) => {
    const run = await runRunner(makeInput(`Try [[berth:error ${kind}]]`))
    expect(run.exitCode).toBe(0)
    expect(run.result).toMatchObject({ outcome: 'model_error', error: expect.stringContaining('API Error') })
  })

  it('a model error after a tool turn keeps that turn in the result', async () => {
    const run = await runRunner(makeInput('Go [[berth:tool Bash {"command":"true"}]] [[berth:error api at=1]]'))
    expect(run.result).toMatchObject({ outcome: 'model_error', turns: 1 })
    expect(run.result!.tool_calls).toHaveLength(1)
  })

  it('resumes a session: the third prompt recalls the first', async () => {
    const first = makeInput('The code word is Lighthouse-7')
    const one = await runRunner(first)
    expect(one.result?.outcome).toBe('success')
    const session = one.result!.session_id!
    const two = await runRunner({ ...makeInput('Second prompt', { cwd: first.cwd, resume: session }), task_id: 't2' })
    expect(two.result).toMatchObject({ outcome: 'success', session_id: session })
    const three = await runRunner(
      makeInput('What was it? [[berth:recall]]', { cwd: first.cwd, resume: session, task_id: 't3' }),
    )
    expect(three.result).toMatchObject({
      outcome: 'success',
      text: 'The first prompt was: The code word is Lighthouse-7',
    })
  })

  it('redacts secret values from stdout, the events file and the result, even split across tokens', async () => {
    const secret = 'open sesame 12345'
    const input = makeInput(
      `Show it [[berth:tool Bash {"command":"echo $MY_SECRET; echo x-$MY_SECRET-y"}]] [[berth:text The words are ${secret} ok]]`,
      {
        env: { MY_SECRET: secret },
        redact: [secret],
      },
    )
    const run = await runRunner(input)
    expect(run.result?.outcome).toBe('success')
    const stdout = run.lines.join('\n')
    const file = readFileSync(input.events_file, 'utf8')
    expect(stdout).not.toContain('sesame')
    expect(file).not.toContain('sesame')
    expect(JSON.stringify(run.result)).not.toContain('sesame')
    expect(run.events.find((e) => e.type === 'tool_result')).toMatchObject({ output: '[REDACTED]\nx-[REDACTED]-y' })
    const tokens = run.events.filter((e) => e.type === 'token').map((e) => (e as { text: string }).text)
    expect(tokens.join('')).toContain('The words are [REDACTED] ok')
    expect(run.result!.text).toBe('The words are [REDACTED] ok')
    expect(parseLines(file)).toEqual(run.events)
  })

  it('SIGTERM mid-run ends with outcome error_during_execution "cancelled" and exit 0', async () => {
    let signalled = 0
    const words = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ')
    const input = makeInput(`Talk slowly [[berth:slow 200]] [[berth:text ${words}]]`)
    const run = await runRunner(input, {
      onEvent: (e, child) => {
        if (e.type === 'token' && !signalled) {
          signalled = Date.now()
          child.kill('SIGTERM')
        }
      },
    })
    expect(signalled).toBeGreaterThan(0)
    expect(run.exitCode).toBe(0)
    expect(run.result).toMatchObject({ outcome: 'error_during_execution', error: 'cancelled' })
    expect(Date.now() - signalled).toBeLessThan(8000)
    expect(run.events.filter((e) => e.type === 'result')).toHaveLength(1)
    expect(readFileSync(input.events_file, 'utf8')).toBe(run.lines.map((l) => `${l}\n`).join(''))
  })

  it('invalid input: one error event and exit code 2', async () => {
    const bad = await runRunner({ protocol: 1, prompt: 42 })
    expect(bad.exitCode).toBe(2)
    expect(bad.events).toHaveLength(1)
    expect(bad.events[0]).toMatchObject({ type: 'error', message: expect.stringContaining('invalid RunnerInput') })
    const notJson = await runRunner('{nope')
    expect(notJson.exitCode).toBe(2)
    expect(notJson.events).toEqual([{ type: 'error', message: expect.stringContaining('not JSON') }])
  })

  // How fast is `pnpm bench` (bench/tasks.ts, the bare runner's first token and result); here, what streams.
  it('streams an answer token by token, before its result, three runs in a row', async () => {
    for (let i = 0; i < 3; i++) {
      const run = await runRunner(makeInput(`Hello ${i} [[berth:text Hi there, run ${i}]]`))
      expect(run.result?.outcome).toBe('success')
      const types = run.events.map((e) => e.type)
      expect(types.indexOf('token')).toBeGreaterThanOrEqual(0)
      expect(types.lastIndexOf('token')).toBeLessThan(types.indexOf('result'))
      const streamed = run.events.flatMap((e) => (e.type === 'token' ? [e.text] : [])).join('')
      expect(streamed).toBe(`Hi there, run ${i}`)
      expect(run.result?.text).toBe(streamed)
    }
  })
})
