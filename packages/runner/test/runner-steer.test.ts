import { execFileSync, spawn } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { RunnerEvent } from '@berth/contract'
import { describe, expect, it } from 'vitest'
import { BUNDLE_DIR, control, makeInput, parseLines, runRunner } from './helpers.js'

const ofType = <T extends RunnerEvent['type']>(events: RunnerEvent[], type: T) =>
  events.filter((e): e is Extract<RunnerEvent, { type: T }> => e.type === type)

/** Process ids whose command line contains `needle` (none once the tool's process is gone). */
function processesWith(needle: string): string[] {
  try {
    return execFileSync('pgrep', ['-f', needle], { encoding: 'utf8' }).split('\n').filter(Boolean)
  } catch {
    return []
  }
}

// The bundled runner with the real SDK against the offline model, steered through control
// lines on its stdin as the server writes them.
describe('berth-runner steering (stub provider)', () => {
  it('asks before a matching tool: a denial reaches the agent, an allowed call runs', async () => {
    const marker = 'marker'
    const touch = `touch ${marker}`
    const input = makeInput(
      `Make the marker [[berth:tool Bash {"command":"${touch}"}]] [[berth:tool Bash {"command":"${touch}"}]] [[berth:text Marker done.]]`,
      { require_approval: ['Bash'] },
    )
    const path = join(input.cwd, marker)
    let sawFileAfterDenial: boolean | null = null
    let requestsSeen = 0
    const run = await runRunner(input, {
      keepOpen: true,
      onEvent: (e, child) => {
        if (e.type === 'permission_decision' && e.decision === 'deny') sawFileAfterDenial = existsSync(path)
        if (e.type !== 'permission_request') return
        const first = requestsSeen++ === 0
        control(
          child,
          first
            ? { type: 'decision', request_id: e.request_id, decision: 'deny', message: 'not on a Friday' }
            : { type: 'decision', request_id: e.request_id, decision: 'allow' },
        )
      },
    })
    expect(run.exitCode, run.stderr).toBe(0)
    const requests = ofType(run.events, 'permission_request')
    expect(requests).toHaveLength(2)
    expect(requests[0]).toMatchObject({
      tool: 'Bash',
      input: { command: touch },
      request_id: expect.stringMatching(/^apr_/),
    })
    const decisions = ofType(run.events, 'permission_decision')
    expect(decisions).toEqual([
      {
        type: 'permission_decision',
        request_id: requests[0]!.request_id,
        decision: 'deny',
        message: 'not on a Friday',
        by: 'caller',
      },
      {
        type: 'permission_decision',
        request_id: requests[1]!.request_id,
        decision: 'allow',
        message: null,
        by: 'caller',
      },
    ])
    expect(sawFileAfterDenial).toBe(false)
    expect(existsSync(path)).toBe(true)
    // The agent's next turn saw why: the denial is the first call's result.
    const results = ofType(run.events, 'tool_result')
    expect(results[0]).toMatchObject({ is_error: true, output: expect.stringContaining('not on a Friday') })
    expect(results[1]).toMatchObject({ is_error: false })
    expect(run.result).toMatchObject({ outcome: 'success' })
  })

  it('denies a request no one decides at approval_timeout_s, and the agent reads why', async () => {
    const input = makeInput(
      'Try [[berth:tool Bash {"command":"touch marker"}]] [[berth:echo_last_result]] [[berth:text Gave up.]]',
      { require_approval: ['Bash(touch:*)'], approval_timeout_s: 1 },
    )
    const run = await runRunner(input, { keepOpen: true })
    expect(run.exitCode, run.stderr).toBe(0)
    const [request] = ofType(run.events, 'permission_request')
    expect(ofType(run.events, 'permission_decision')).toEqual([
      {
        type: 'permission_decision',
        request_id: request!.request_id,
        decision: 'deny',
        message: expect.stringContaining('within 1 s'),
        by: 'timeout',
      },
    ])
    expect(existsSync(join(input.cwd, 'marker'))).toBe(false)
    expect(run.result).toMatchObject({ outcome: 'success', text: expect.stringContaining('No one decided') })
  })

  it.each([
    ['an interrupt', 'interrupted', null],
    ['a cancel (SIGTERM)', 'error_during_execution', 'cancelled'],
  ])('ends a run waiting for a decision at %s, the tool not run', async (how, outcome, error) => {
    const input = makeInput('Try [[berth:tool Bash {"command":"touch waited"}]] [[berth:text Never.]]', {
      require_approval: ['Bash'],
    })
    const run = await runRunner(input, {
      keepOpen: true,
      onEvent: (e, child) => {
        if (e.type !== 'permission_request') return
        if (how === 'an interrupt') control(child, { type: 'interrupt' })
        else child.kill('SIGTERM')
      },
    })
    expect(run.exitCode, run.stderr).toBe(0)
    expect(ofType(run.events, 'permission_request')).toHaveLength(1)
    // No one decided: the request ends with the run, not with a made-up decision.
    expect(ofType(run.events, 'permission_decision')).toEqual([])
    expect(existsSync(join(input.cwd, 'waited'))).toBe(false)
    expect(run.result).toMatchObject({ outcome, ...(error ? { error } : {}) })
  })

  it('asks for read-only tools and file-path rules too (Claude Code would run Read without asking)', async () => {
    const cwd = makeInput('').cwd
    writeFileSync(join(cwd, 'notes.txt'), 'harbour notes')
    const input = makeInput(
      `Files [[berth:tool Read {"file_path":"${cwd}/notes.txt"}]] [[berth:tool Write {"file_path":"${cwd}/secret/key.txt","content":"k"}]] [[berth:tool Write {"file_path":"${cwd}/open.txt","content":"o"}]] [[berth:text Filed.]]`,
      { cwd, require_approval: ['Read', `Write(${cwd}/secret/**)`] },
    )
    const run = await runRunner(input, {
      keepOpen: true,
      onEvent: (e, child) => {
        if (e.type === 'permission_request')
          control(child, { type: 'decision', request_id: e.request_id, decision: e.tool === 'Read' ? 'allow' : 'deny' })
      },
    })
    expect(run.exitCode, run.stderr).toBe(0)
    expect(ofType(run.events, 'permission_request').map((e) => e.tool)).toEqual(['Read', 'Write'])
    expect(ofType(run.events, 'tool_result').map((e) => e.is_error)).toEqual([false, true, false])
    expect(ofType(run.events, 'tool_result')[0]!.output).toContain('harbour notes')
    expect(existsSync(join(cwd, 'secret/key.txt'))).toBe(false)
    expect(existsSync(join(cwd, 'open.txt'))).toBe(true)
  })

  it('runs calls no rule matches without asking, and an allowed call with the input the decision gave', async () => {
    const input = makeInput(
      'Go [[berth:tool Bash {"command":"echo unasked"}]] [[berth:tool Bash {"command":"touch asked.txt"}]] [[berth:text Ok.]]',
      { require_approval: ['Bash(touch:*)', 'mcp__pay__*'] },
    )
    const run = await runRunner(input, {
      keepOpen: true,
      onEvent: (e, child) => {
        if (e.type === 'permission_request')
          control(child, {
            type: 'decision',
            request_id: e.request_id,
            decision: 'allow',
            input: { command: 'touch replaced.txt' },
          })
      },
    })
    expect(run.exitCode, run.stderr).toBe(0)
    const requests = ofType(run.events, 'permission_request')
    expect(requests).toHaveLength(1)
    expect(requests[0]).toMatchObject({ tool: 'Bash', input: { command: 'touch asked.txt' } })
    expect(ofType(run.events, 'tool_result')[0]).toMatchObject({ output: 'unasked', is_error: false })
    expect(existsSync(join(input.cwd, 'replaced.txt'))).toBe(true)
    expect(existsSync(join(input.cwd, 'asked.txt'))).toBe(false)
    // The decision and the result show the input that ran, and the agent's beside it.
    expect(ofType(run.events, 'permission_decision')).toEqual([
      expect.objectContaining({
        decision: 'allow',
        input: { command: 'touch replaced.txt' },
        original_input: { command: 'touch asked.txt' },
      }),
    ])
    const calls = ofType(run.events, 'result')[0]!.tool_calls
    expect(calls.map((c) => [c.input, c.original_input])).toEqual([
      [{ command: 'echo unasked' }, undefined],
      [{ command: 'touch replaced.txt' }, { command: 'touch asked.txt' }],
    ])
  })

  it('hands a message sent mid-task to the agent at its next turn boundary', async () => {
    const input = makeInput(
      'Work [[berth:tool Bash {"command":"echo working; sleep 2"}]] [[berth:reply_last_user]] [[berth:text Working.]]',
    )
    const run = await runRunner(input, {
      keepOpen: true,
      onEvent: (e, child) => {
        if (e.type !== 'tool_call') return
        control(child, 'this is not json')
        control(child, { type: 'message', text: 'Use the blue harbour' })
      },
    })
    expect(run.exitCode, run.stderr).toBe(0)
    expect(ofType(run.events, 'error')).toEqual([
      { type: 'error', message: expect.stringContaining('control line is not JSON') },
    ])
    expect(ofType(run.events, 'user_message').map((e) => e.text)).toEqual([input.prompt, 'Use the blue harbour'])
    expect(run.result).toMatchObject({
      outcome: 'success',
      text: expect.stringContaining('Last message: Use the blue harbour'),
    })
  })

  it.each([
    ['the SDK winds the turn down', {}, 'sleep 29.871'],
    // Claude Code given no time: the runner kills the tool's processes and stops it.
    ['the runner stops Claude Code', { BERTH_RUNNER_INTERRUPT_GRACE_MS: '1' }, 'sleep 29.872'],
  ])(
    'interrupts a turn mid-tool (%s): the tool process dies and the result keeps the partial run',
    async (_, env, sleep) => {
      // Not a bare `sleep N`: Claude Code refuses those and asks for a background task.
      const command = `echo start; ${sleep}; echo slept`
      const input = makeInput(`Wait [[berth:tool Bash {"command":"${command}"}]] [[berth:text Never.]]`)
      let interruptedAt = 0
      const run = await runRunner(input, {
        keepOpen: true,
        env,
        onEvent: (e, child) => {
          if (e.type !== 'tool_call') return
          const poll = setInterval(() => {
            if (processesWith(sleep).length === 0) return
            clearInterval(poll)
            interruptedAt = Date.now()
            control(child, { type: 'interrupt' })
          }, 50)
        },
      })
      const tookMs = Date.now() - interruptedAt
      expect(run.exitCode, run.stderr).toBe(0)
      expect(interruptedAt).toBeGreaterThan(0)
      console.error(`[interrupt] result ${tookMs} ms after the interrupt line`)
      // Far from the 30 s the tool would take: the interrupt ended it.
      expect(tookMs).toBeLessThan(10_000)
      expect(processesWith(sleep)).toEqual([])
      expect(run.result).toMatchObject({
        outcome: 'interrupted',
        session_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        tool_calls: [{ name: 'Bash', input: { command } }],
        turns: 1,
      })
      expect(run.result!.text).toContain('Calling Bash')

      // The session goes on: a follow-up resumes it with the interrupted prompt in context.
      const followUp = await runRunner(
        makeInput('What did I ask? [[berth:recall]]', {
          cwd: input.cwd,
          resume: run.result!.session_id,
          task_id: 'task_2',
        }),
      )
      expect(followUp.result).toMatchObject({ outcome: 'success', text: `The first prompt was: ${input.prompt}` })
    },
  )

  it('answers with structured output valid for output_schema', async () => {
    const schema = {
      type: 'object',
      properties: { berth: { type: 'integer' }, free: { type: 'boolean' } },
      required: ['berth', 'free'],
    }
    const run = await runRunner(
      makeInput('Which berth? [[berth:json {"berth":7,"free":true}]]', { output_schema: schema }),
    )
    expect(run.exitCode, run.stderr).toBe(0)
    expect(run.result).toMatchObject({ outcome: 'success', structured_output: { berth: 7, free: true }, error: null })
  })

  it('fails clearly when no answer can satisfy output_schema', async () => {
    const schema = {
      type: 'object',
      properties: { berth: { type: 'integer', minimum: 100, maximum: 1 } },
      required: ['berth'],
    }
    const run = await runRunner(makeInput('Which berth? [[berth:json {"berth":7}]]', { output_schema: schema }))
    expect(run.exitCode, run.stderr).toBe(0)
    expect(run.result).toMatchObject({
      outcome: 'error_output_invalid',
      error: expect.stringContaining('output_schema'),
    })
    expect(run.result!.structured_output).toBeUndefined()
  })

  it('takes control lines after the prompt line in warm mode', async () => {
    const input = makeInput('placeholder', { require_approval: ['Bash(touch:*)'] })
    const child = spawn(process.execPath, [join(BUNDLE_DIR, 'main.js'), '--warm'], { stdio: ['pipe', 'pipe', 'pipe'] })
    const send = (line: unknown) => child.stdin.write(`${JSON.stringify(line)}\n`)
    let stdout = ''
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c))
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c
      const request = parseLines(stdout.slice(0, stdout.lastIndexOf('\n') + 1)).find(
        (e) => e.type === 'permission_request',
      )
      if (request && !stdout.includes('"permission_decision"'))
        send({ type: 'decision', request_id: request.request_id, decision: 'allow' })
    })
    const closed = new Promise<number | null>((resolve) => child.on('close', resolve))
    send({ type: 'init', input })
    send({
      type: 'prompt',
      task_id: 'task_w',
      prompt: 'Go [[berth:tool Bash {"command":"touch warm.txt"}]] [[berth:text Warm done.]]',
      events_file: '.berth/events/task_w.jsonl',
    })
    expect(await closed, stderr).toBe(0)
    const events = parseLines(stdout)
    expect(events.map((e) => e.type)).toContain('permission_decision')
    expect(existsSync(join(input.cwd, 'warm.txt'))).toBe(true)
    expect(events.at(-1)).toMatchObject({ type: 'result', outcome: 'success', text: 'Warm done.' })
  })

  it('still runs an input sent as one pretty-printed JSON document ended by EOF (an older server)', async () => {
    const input = makeInput('Hello [[berth:text Old style.]]')
    const run = await runRunner(JSON.stringify(input, null, 2))
    expect(run.exitCode, run.stderr).toBe(0)
    expect(run.result).toMatchObject({ outcome: 'success', text: 'Old style.' })
  })
})
