import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it, vi } from 'vitest'
import { makeInput, parseLines, warmRunner } from './helpers.js'

// The warm mode a pooled agent runs in: Claude Code starts on the init line and serves the
// prompt line that comes later, as the one-shot runner would have.
describe('berth-runner --warm (stub provider)', () => {
  it('starts Claude Code before the prompt, says when it is up, then runs the prompt it is handed', async () => {
    const input = makeInput('placeholder, never shown', {
      task_id: 'warm',
      skills: [{ name: 'greet', description: 'Greets', body: 'Say hello.' }],
    })
    const r = warmRunner({ BERTH_RUNNER_PROBE: '1' })
    r.send({ type: 'init', input })
    await vi.waitFor(() => expect(r.stderr()).toContain('{"warm":"ready"}'), 60_000)
    // Nothing is said before there is a task; the skill is in place already.
    expect(r.stdout()).toBe('')
    expect(existsSync(join(input.cwd, '.claude/skills/greet/SKILL.md'))).toBe(true)

    r.send({
      type: 'prompt',
      task_id: 'task_w1',
      prompt: 'Go. [[berth:tool Bash {"command":"echo warm-$((40+2))"}]] [[berth:text Done warm.]]',
      events_file: '.berth/events/task_w1.jsonl',
    })
    r.child.stdin.end()
    expect(await r.closed, r.stderr()).toBe(0)
    const events = parseLines(r.stdout())
    expect(events[0]).toEqual({ type: 'user_message', text: expect.stringContaining('Go.') })
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({ output: 'warm-42', is_error: false })
    expect(events.at(-1)).toMatchObject({ type: 'result', outcome: 'success', text: 'Done warm.' })
    expect(events.filter((e) => e.type === 'result')).toHaveLength(1)
    // The events file is the prompt's, not the init line's.
    expect(readFileSync(join(input.cwd, '.berth/events/task_w1.jsonl'), 'utf8')).toBe(r.stdout())
    // The probe saw Claude Code up before the prompt came.
    const marks: Record<string, number> = Object.fromEntries(
      r
        .stderr()
        .split('\n')
        .filter((l) => l.startsWith('{"probe"'))
        .map((l) => JSON.parse(l) as { probe: string; t: number })
        .map((p) => [p.probe, p.t]),
    )
    expect(marks.ready).toBeLessThanOrEqual(marks.prompt!)
    expect(marks.prompt).toBeLessThanOrEqual(marks.token!)
    // Its first-prompt set-up was done while parked, and cost no model request.
    expect(marks.primed).toBeLessThanOrEqual(marks.ready!)
    expect(marks.request).toBeGreaterThanOrEqual(marks.prompt!)
  })

  it('exits quietly when stdin ends before a prompt (an evicted agent)', async () => {
    const r = warmRunner()
    r.send({ type: 'init', input: makeInput('x', { task_id: 'warm' }) })
    r.child.stdin.end()
    expect(await r.closed).toBe(0)
    expect(r.stdout()).toBe('')
  })

  it('refuses a first line that is not an init line', async () => {
    const r = warmRunner()
    r.send({ type: 'prompt', task_id: 't', prompt: 'x', events_file: 'e.jsonl' })
    r.child.stdin.end()
    expect(await r.closed).toBe(2)
    expect(parseLines(r.stdout())).toEqual([{ type: 'error', message: expect.stringContaining('init') }])
  })
})
