import { join } from 'node:path'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import type { RunnerEvent } from '@berth/contract'
import { describe, expect, it, vi } from 'vitest'
import { freePort, makeInput, parseLines, probe, warmRunner } from './helpers.js'

/** The pids of Claude Code processes (the native binary) whose working directory is `dir`. */
function claudeIn(dir: string): number[] {
  const pids: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (readlinkSync(`/proc/${name}/cwd`) !== dir) continue
      const cmd = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0')
      if (cmd.some((a) => /claude(-code)?$/.test(a) || a.endsWith('/cli.js'))) pids.push(Number(name))
    } catch {
      // Gone, or not ours to read.
    }
  }
  return pids
}

const results = (events: RunnerEvent[]) => events.filter((e) => e.type === 'result')

// Issue 42: a session's agent lives between follow-ups. One runner, one Claude Code: each
// prompt line is a task that ends with its turn; with `stay` the agent and what it left
// running in the background live on for the next one.
describe('berth-runner --warm with stay: a living session', () => {
  it('keeps Claude Code and its background server between tasks, and hands a background end to the next task', async () => {
    const port = await freePort()
    const server = `node -e "require('http').createServer((q,r)=>r.end('living-'+'server')).listen(${port})"`
    const input = makeInput('placeholder', { task_id: 'warm', allowed_tools: ['Bash'] })
    const r = warmRunner()
    r.send({ type: 'init', input })
    r.send({
      type: 'prompt',
      task_id: 'task_1',
      stay: true,
      events_file: '.berth/events/task_1.jsonl',
      prompt:
        `First. [[berth:tool Bash ${JSON.stringify({ command: server, run_in_background: true })}]] ` +
        `[[berth:tool Bash ${JSON.stringify({ command: 'sleep 2; echo build-done', run_in_background: true })}]] [[berth:text Serving.]]`,
    })
    await vi.waitFor(() => expect(results(r.events())).toHaveLength(1), 60_000)
    const first = results(r.events())[0]!
    expect(first).toMatchObject({ outcome: 'success', text: 'Serving.', error: null })
    // The result is out and the runner still runs, and so does the server it started.
    await vi.waitFor(async () => expect(await probe(port)).toBe('living-server'), 30_000)
    const agents = claudeIn(input.cwd)
    expect(agents).toHaveLength(1)
    // The build ends between the tasks: said on stdout (no task's), not in task 1's file.
    await vi.waitFor(
      () =>
        expect(r.events().at(-1)).toMatchObject({ type: 'background_task', status: 'completed', kind: 'local_bash' }),
      30_000,
    )
    const firstFile = parseLines(readFileSync(join(input.cwd, '.berth/events/task_1.jsonl'), 'utf8'))
    expect(firstFile.at(-1)?.type).toBe('result')
    expect(firstFile.filter((e) => e.type === 'background_task' && e.status !== 'running')).toEqual([])
    const before = r.events().length
    r.send({
      type: 'prompt',
      task_id: 'task_2',
      stay: true,
      events_file: '.berth/events/task_2.jsonl',
      prompt: `Second. [[berth:tool Bash ${JSON.stringify({ command: `node -e "require('http').get('http://127.0.0.1:${port}',r=>r.pipe(process.stdout))"` })}]] [[berth:recall_all]]`,
    })
    await vi.waitFor(() => expect(results(r.events())).toHaveLength(2), 60_000)
    const second = parseLines(readFileSync(join(input.cwd, '.berth/events/task_2.jsonl'), 'utf8'))
    // The background end came first in task 2, then its prompt.
    expect(second[0]).toMatchObject({ type: 'background_task', status: 'completed' })
    expect(second.findIndex((e) => e.type === 'user_message')).toBeGreaterThan(0)
    expect(
      r
        .events()
        .slice(before)
        .filter((e) => e.type === 'tool_result'),
    ).toContainEqual(expect.objectContaining({ output: 'living-server' }))
    // The same conversation, in the same Claude Code process.
    expect(second.at(-1)).toMatchObject({ type: 'result', outcome: 'success' })
    expect((second.at(-1) as { text: string }).text).toContain('First.')
    expect(claudeIn(input.cwd)).toEqual(agents)
    // Each task's figures are its own calls.
    expect(first.session_id).toBe((second.at(-1) as { session_id: string }).session_id)
    // Stdin ends (the session is stopped): the background server and Claude Code go.
    r.child.stdin.end()
    expect(await r.closed, r.stderr()).toBe(0)
    await vi.waitFor(async () => expect(await probe(port)).toBe('ECONNREFUSED'), 30_000)
    expect(claudeIn(input.cwd)).toEqual([])
  })

  it('without stay the agent ends after the task: its background work is stopped before the result', async () => {
    const port = await freePort()
    const server = `node -e "require('http').createServer((q,r)=>r.end('x')).listen(${port})"`
    const input = makeInput('placeholder', { task_id: 'warm', allowed_tools: ['Bash'] })
    const r = warmRunner()
    r.send({ type: 'init', input })
    r.send({
      type: 'prompt',
      task_id: 'task_b',
      events_file: '.berth/events/task_b.jsonl',
      prompt: `Go. [[berth:tool Bash ${JSON.stringify({ command: server, run_in_background: true })}]] [[berth:text Done.]]`,
    })
    // The runner exits on its own (stdin still open): no second task for it.
    expect(await r.closed, r.stderr()).toBe(0)
    expect(r.events().at(-1)).toMatchObject({ type: 'result', outcome: 'success', text: 'Done.' })
    expect(await probe(port)).toBe('ECONNREFUSED')
  })

  it("each task's max_budget_usd holds against its own calls, not the agent's earlier tasks", async () => {
    // $0.27 a call at Sonnet prices: two tasks of one call each stay under $0.50 apiece.
    const spend = '[[berth:usage input=60000 output=6000]]'
    const input = makeInput('placeholder', { task_id: 'warm', allowed_tools: ['Bash'], max_budget_usd: 0.5 })
    const r = warmRunner()
    r.send({ type: 'init', input })
    const prompts = [`One. ${spend}`, `Two. ${spend}`, `Three. ${spend} [[berth:turns 4]]`, `Four. ${spend}`]
    for (const [i, prompt] of prompts.entries()) {
      const id = `task_${i + 1}`
      r.send({ type: 'prompt', task_id: id, stay: true, events_file: `.berth/events/${id}.jsonl`, prompt })
      await vi.waitFor(() => expect(results(r.events())).toHaveLength(i + 1), 60_000)
    }
    const [one, two, three, four] = results(r.events())
    for (const ok of [one, two, four])
      expect(ok).toMatchObject({ outcome: 'success', cost_usd: expect.closeTo(0.27, 6) })
    // The third task's second call passed its budget: no third call, and the agent lives on.
    expect(three).toMatchObject({
      outcome: 'error_max_budget_usd',
      error: 'Reached maximum budget ($0.5)',
      turns: 2,
      cost_usd: expect.closeTo(0.54, 6),
    })
    r.child.stdin.end()
    expect(await r.closed, r.stderr()).toBe(0)
  })

  it('a living agent that ended (stdin closed) left its conversation for the next agent to resume', async () => {
    const input = makeInput('placeholder', { task_id: 'warm', allowed_tools: ['Bash'] })
    const r = warmRunner()
    r.send({ type: 'init', input })
    r.send({
      type: 'prompt',
      task_id: 'task_1',
      stay: true,
      events_file: '.berth/events/t1.jsonl',
      prompt: 'Remember OSPREY-7.',
    })
    await vi.waitFor(() => expect(results(r.events())).toHaveLength(1), 60_000)
    const sessionId = results(r.events())[0]!.session_id
    r.child.stdin.end()
    expect(await r.closed, r.stderr()).toBe(0)
    const next = warmRunner()
    next.send({ type: 'init', input: { ...input, resume: sessionId } })
    next.send({
      type: 'prompt',
      task_id: 'task_2',
      events_file: '.berth/events/t2.jsonl',
      prompt: 'Again? [[berth:recall]]',
    })
    expect(await next.closed, next.stderr()).toBe(0)
    expect(results(next.events())[0]).toMatchObject({ outcome: 'success', text: expect.stringContaining('OSPREY-7') })
  })

  it('holds each task to its own max_budget_usd and max_turns: earlier tasks of the agent do not count', async () => {
    const input = makeInput('placeholder', { task_id: 'warm', max_turns: 3, max_budget_usd: 0.05 })
    const r = warmRunner()
    r.send({ type: 'init', input })
    // Each task costs about a third of the budget: five of them are well over it together.
    for (let i = 1; i <= 5; i++) {
      r.send({
        type: 'prompt',
        task_id: `t${i}`,
        stay: true,
        events_file: `.berth/events/t${i}.jsonl`,
        prompt: `Go ${i}. [[berth:tool Bash {"command":"echo ${i}"}]] [[berth:text Done ${i}.]]`,
      })
      await vi.waitFor(() => expect(results(r.events())).toHaveLength(i), 60_000)
    }
    expect(results(r.events()).map((e) => [e.outcome, e.turns])).toEqual(Array(5).fill(['success', 2]))
    // One task over its own budget stops there, and the agent takes the next.
    r.send({
      type: 'prompt',
      task_id: 't6',
      stay: true,
      events_file: '.berth/events/t6.jsonl',
      prompt: 'Spend [[berth:turns 6]] [[berth:usage input=100000 output=10000]]',
    })
    await vi.waitFor(() => expect(results(r.events())).toHaveLength(6), 60_000)
    expect(results(r.events())[5]).toMatchObject({
      outcome: 'error_max_budget_usd',
      error: 'Reached maximum budget ($0.05)',
    })
    r.send({
      type: 'prompt',
      task_id: 't7',
      stay: true,
      events_file: '.berth/events/t7.jsonl',
      prompt: 'Again. [[berth:text Fine.]]',
    })
    await vi.waitFor(() => expect(results(r.events())).toHaveLength(7), 60_000)
    expect(results(r.events())[6]).toMatchObject({ outcome: 'success', text: 'Fine.' })
    r.child.stdin.end()
    expect(await r.closed, r.stderr()).toBe(0)
  })
})
