import type { SDKMessage } from '@anthropic-ai/claude-agent-sdk'
import type { RunnerEvent } from '@berth/contract'
import { describe, expect, it } from 'vitest'
import { createRedactor } from '../src/redact.js'
import { Meter } from '../src/meter.js'
import { Transcript } from '../src/transcript.js'
import { TurnWatch } from '../src/turn.js'

// The SDK's messages as Claude Code streams them (only the fields the watch reads).
const msg = (m: Record<string, unknown>) => ({ session_id: 's', uuid: 'u', ...m }) as unknown as SDKMessage
const stream = (event: Record<string, unknown>, parent: string | null = null) =>
  msg({ type: 'stream_event', event, parent_tool_use_id: parent })
const start = (parent: string | null = null) =>
  stream({ type: 'message_start', message: { model: 'claude-sonnet-4-5', usage: { input_tokens: 10 } } }, parent)
const stopReason = (reason: string, parent: string | null = null) =>
  stream({ type: 'message_delta', delta: { stop_reason: reason }, usage: { output_tokens: 5 } }, parent)
const stop = (parent: string | null = null) => stream({ type: 'message_stop' }, parent)
const assistant = (content: unknown[], parent: string | null = null) =>
  msg({
    type: 'assistant',
    message: { model: 'claude-sonnet-4-5', content, stop_reason: null },
    parent_tool_use_id: parent,
  })
const toolResult = (id: string) =>
  msg({
    type: 'user',
    message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'ok' }] },
    parent_tool_use_id: null,
  })
const background = (...ids: string[]) =>
  msg({
    type: 'system',
    subtype: 'background_tasks_changed',
    tasks: ids.map((id) => ({ task_id: id, task_type: 'local_bash', description: `server ${id}` })),
  })
const result = msg({ type: 'result', subtype: 'success', is_error: false, result: 'Done.' })

/** A turn that starts a background shell, then a final text turn; the ends the watch reported. */
function backgroundTurns(watch: TurnWatch): Array<string | null> {
  return [
    start(),
    assistant([{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'serve', run_in_background: true } }]),
    stopReason('tool_use'),
    stop(),
    background('b1'),
    toolResult('t1'),
    start(),
    assistant([{ type: 'text', text: 'Serving.' }]),
    stopReason('end_turn'),
    stop(),
  ].map((m) => watch.push(m))
}

describe('TurnWatch: when the agent has ended its turn', () => {
  it("the SDK result for the task's messages ends the turn; one of Claude Code's own does not", () => {
    const watch = new TurnWatch()
    watch.sent('u-prompt')
    // On a resumed conversation: the notice that the previous process's background task was stopped.
    expect(watch.push(msg({ ...result, result: '', origin: { kind: 'task-notification' } }))).toBeNull()
    expect(watch.push(msg({ ...result, user_message_uuid: 'u-other', user_message_uuids: ['u-other'] }))).toBeNull()
    const folded = { user_message_uuid: 'u-later', user_message_uuids: ['u-prompt', 'u-later'] }
    expect(watch.push(msg({ ...result, ...folded }))).toBe('result')
    // A result that echoes no message (a crash at start, an older CLI) is the turn's.
    expect(new TurnWatch().push(result)).toBe('result')
  })

  it("with background work running, the agent's final message ends the turn (the result may be held back)", () => {
    const watch = new TurnWatch()
    const ends = backgroundTurns(watch)
    expect(ends.slice(0, -1).every((e) => e === null)).toBe(true)
    expect(ends.at(-1)).toBe('final_message')
    expect(watch.atFinalMessage).toBe(true)
    expect(watch.background()).toEqual([
      { task_id: 'b1', task_type: 'local_bash', description: 'server b1', since: expect.any(String) },
    ])
    // Reported once; a new model call (a follow-up, a notification) opens the turn again.
    expect(watch.push(stop())).toBeNull()
    watch.push(start())
    expect(watch.atFinalMessage).toBe(false)
  })

  it('without background work the final message waits for the result; a tool call or a tool_use stop ends nothing', () => {
    const watch = new TurnWatch()
    const ends = [
      start(),
      assistant([{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'ls' } }]),
      stopReason('tool_use'),
      stop(),
      toolResult('t1'),
      start(),
      assistant([{ type: 'text', text: 'Done.' }]),
      stopReason('end_turn'),
      stop(),
    ].map((m) => watch.push(m))
    expect(ends.every((e) => e === null)).toBe(true)
    expect(watch.atFinalMessage).toBe(true)
  })

  it("a subagent's end of turn is not the main agent's; the background set is replaced, not added to", () => {
    const watch = new TurnWatch()
    watch.push(background('b1', 'b2'))
    watch.push(start())
    watch.push(assistant([{ type: 'tool_use', id: 'a1', name: 'Task', input: {} }]))
    watch.push(stopReason('tool_use'))
    watch.push(stop())
    expect([start('a1'), stopReason('end_turn', 'a1'), stop('a1')].map((m) => watch.push(m))).toEqual([
      null,
      null,
      null,
    ])
    watch.push(background('b2'))
    expect(watch.background().map((t) => t.task_id)).toEqual(['b2'])
    watch.push(background())
    expect(watch.background()).toEqual([])
  })
})

describe('TurnWatch in a living session: several tasks in one Claude Code process', () => {
  const lifecycle = (uuid: string, state: string) => msg({ type: 'command_lifecycle', command_uuid: uuid, state })

  it("a turn Claude Code takes of its own (a background task's end) before the task's message does not end the task", () => {
    const watch = new TurnWatch()
    // Task 1 left a server running and ended its turn.
    watch.sent('u-1')
    watch.push(lifecycle('u-1', 'started'))
    expect(backgroundTurns(watch).at(-1)).toBe('final_message')
    // Task 2's prompt is queued while the agent answers a notification on its own.
    watch.beginTask()
    watch.sent('u-2')
    watch.push(lifecycle('u-2', 'queued'))
    expect(
      [start(), assistant([{ type: 'text', text: 'Noted.' }]), stopReason('end_turn'), stop()].map((m) =>
        watch.push(m),
      ),
    ).toEqual([null, null, null, null])
    expect(watch.push(msg({ ...result, origin: { kind: 'task-notification' } }))).toBeNull()
    // Now the task's own turn: its final message ends it.
    watch.push(lifecycle('u-2', 'started'))
    expect(
      [start(), assistant([{ type: 'text', text: 'Second.' }]), stopReason('end_turn'), stop()]
        .map((m) => watch.push(m))
        .at(-1),
    ).toBe('final_message')
    // Task 1's uuid no longer counts for task 2.
    expect(watch.push(msg({ ...result, user_message_uuids: ['u-1'] }))).toBeNull()
    expect(watch.push(msg({ ...result, user_message_uuids: ['u-2'] }))).toBe('result')
  })

  it('a background task keeps the time it was first seen running across level signals', async () => {
    const watch = new TurnWatch()
    watch.push(background('b1'))
    const since = watch.background()[0]!.since
    await new Promise((r) => setTimeout(r, 5))
    watch.push(background('b1', 'b2'))
    const [b1, b2] = watch.background()
    expect(b1!.since).toBe(since)
    expect(b2!.since >= since).toBe(true)
  })
})

describe('Transcript: the result of a turn whose SDK result was held back', () => {
  const transcriptOf = (messages: SDKMessage[]) => {
    const events: RunnerEvent[] = []
    const meter = new Meter()
    const t = new Transcript(
      (e) => events.push(e),
      createRedactor([]).stream(),
      (m, u) => meter.add(m, u),
    )
    for (const m of messages) t.push(m)
    return { t, meter }
  }
  const turns = [
    start(),
    assistant([{ type: 'tool_use', id: 't1', name: 'Bash', input: { command: 'serve', run_in_background: true } }]),
    stopReason('tool_use'),
    stop(),
    toolResult('t1'),
    start(),
    assistant([{ type: 'text', text: 'Serving.' }]),
    stopReason('end_turn'),
    stop(),
  ]

  it('is a success with the final text, the calls, and the turns and tokens the run metered', () => {
    const { t, meter } = transcriptOf(turns)
    const r = t.result(() => meter.usage(), undefined, { heldResult: true })
    expect(r).toMatchObject({ outcome: 'success', text: 'Serving.', turns: 2, error: null, input_tokens: 20 })
    expect(r.tool_calls.map((c) => c.name)).toEqual(['Bash'])
    expect(r.cost_usd).toBeGreaterThan(0)
    // Without the turn's end, the same transcript is a run that ended without a result.
    expect(transcriptOf(turns).t.result(() => meter.usage())).toMatchObject({ outcome: 'error_during_execution' })
  })

  it('with an output_schema, the answer is the structured output call', () => {
    const schema = { type: 'object', properties: { port: { type: 'number' } }, required: ['port'] }
    const answer = assistant([{ type: 'tool_use', id: 't2', name: 'StructuredOutput', input: { port: 8001 } }])
    const { t, meter } = transcriptOf([
      ...turns.slice(0, 5),
      ...[start(), answer, stopReason('tool_use'), stop(), toolResult('t2')],
      ...turns.slice(5),
    ])
    expect(t.result(() => meter.usage(), undefined, { heldResult: true, schema })).toMatchObject({
      outcome: 'success',
      structured_output: { port: 8001 },
    })
    const bare = transcriptOf(turns)
    expect(bare.t.result(() => bare.meter.usage(), undefined, { heldResult: true, schema })).toMatchObject({
      outcome: 'error_output_invalid',
    })
  })
})
