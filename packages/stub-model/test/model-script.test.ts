import { describe, expect, it } from 'vitest'
import { answer, DirectiveError, parseScript, readConversation, type MessageParam } from '../src/index.js'

const tools = [{ name: 'Bash' }]
const user = (content: MessageParam['content']): MessageParam => ({ role: 'user', content })
const toolTurn = (id: string): MessageParam[] => [
  {
    role: 'assistant',
    content: [
      { type: 'text', text: 'Calling' },
      { type: 'tool_use', id, name: 'Bash', input: {} },
    ],
  },
  user([{ type: 'tool_result', tool_use_id: id, content: 'ok' }]),
]

describe('offline model: directives and the tool loop', () => {
  it('parses every directive', () => {
    const s = parseScript(
      'a [[berth:tool Bash {"command":"ls"}]] [[berth:tool Read {}]] [[berth:turns 4]] [[berth:text The end.]] ' +
        '[[berth:usage input=500000 output=100000]] [[berth:error api at=2]] [[berth:recall]] [[berth:slow 20]]',
    )
    expect(s).toEqual({
      tools: [
        { name: 'Bash', input: { command: 'ls' } },
        { name: 'Read', input: {} },
      ],
      turns: 4,
      text: 'The end.',
      usage: { input: 500000, output: 100000 },
      error: { kind: 'api', at: 2 },
      recall: true,
      slowMs: 20,
    })
  })

  it('rejects unknown directives and bad arguments', () => {
    expect(() => parseScript('[[berth:explode]]')).toThrow(DirectiveError)
    expect(() => parseScript('[[berth:turns many]]')).toThrow(DirectiveError)
    expect(() => parseScript('[[berth:error teapot]]')).toThrow(DirectiveError)
    expect(() => parseScript('[[berth:tool Bash [1]]]')).toThrow(DirectiveError)
  })

  it('reads the latest prompt, skipping tool results and system reminders', () => {
    const messages: MessageParam[] = [
      user([
        { type: 'text', text: '<system-reminder>\n[[berth:error api]] context\n</system-reminder>' },
        { type: 'text', text: 'first prompt' },
      ]),
      { role: 'assistant', content: 'answer' },
      user('second prompt [[berth:turns 2]]'),
      ...toolTurn('toolu_1'),
    ]
    expect(readConversation(messages)).toMatchObject({
      prompt: 'second prompt [[berth:turns 2]]',
      turn: 1,
      firstPrompt: 'first prompt',
    })
  })

  it('reads a prompt Claude Code put beside an interrupted call’s result as the latest prompt', () => {
    const interrupted = (then: string | null): MessageParam =>
      user([
        { type: 'tool_result', tool_use_id: 'toolu_1', content: 'stopped while running', is_error: true },
        { type: 'text', text: '[Request interrupted by user for tool use]\n' },
        ...(then === null ? [] : [{ type: 'text', text: then }]),
      ])
    const before: MessageParam[] = [user('first prompt [[berth:turns 3]]'), toolTurn('toolu_1')[0]!]
    expect(readConversation([...before, interrupted('next prompt [[berth:recall_all]]')])).toMatchObject({
      prompt: 'next prompt [[berth:recall_all]]',
      turn: 0,
      earlierPrompts: ['first prompt'],
    })
    // The interruption alone is no prompt: the turn goes on counting from the first.
    expect(readConversation([...before, interrupted(null)])).toMatchObject({
      prompt: 'first prompt [[berth:turns 3]]',
      turn: 1,
    })
  })

  it('[[berth:turns N]] calls a harmless tool N times, then answers', () => {
    const prompt = user('loop [[berth:turns 2]] [[berth:text finished]]')
    const a0 = answer({ tools, messages: [prompt] })
    const a1 = answer({ tools, messages: [prompt, ...toolTurn('t1')] })
    const a2 = answer({ tools, messages: [prompt, ...toolTurn('t1'), ...toolTurn('t2')] })
    expect(a0).toMatchObject({ kind: 'message', stop_reason: 'tool_use' })
    expect(a1).toMatchObject({ kind: 'message', stop_reason: 'tool_use' })
    expect(a2).toMatchObject({
      kind: 'message',
      stop_reason: 'end_turn',
      content: [{ type: 'text', text: 'finished' }],
    })
    const call = a0.kind === 'message' ? a0.content.find((b) => b.type === 'tool_use') : undefined
    expect(call).toMatchObject({ name: 'Bash', input: { command: 'echo berth turn 1' } })
  })

  it('never calls a tool when the request offers none (the harness side requests)', () => {
    const a = answer({ messages: [user('x [[berth:tool Bash {}]] [[berth:text plain]]')] })
    expect(a).toMatchObject({ kind: 'message', stop_reason: 'end_turn', content: [{ type: 'text', text: 'plain' }] })
  })

  it('[[berth:recall]] answers with the first prompt of the conversation', () => {
    const a = answer({
      tools,
      messages: [
        user('The code word is harbour'),
        { role: 'assistant', content: 'ok' },
        user('what was it? [[berth:recall]]'),
      ],
    })
    expect(a).toMatchObject({ content: [{ type: 'text', text: 'The first prompt was: The code word is harbour' }] })
  })

  it('[[berth:recall_all]] answers with every earlier prompt, oldest first, directives removed', () => {
    const a = answer({
      tools,
      messages: [
        user('First: alpha [[berth:text ok]]'),
        { role: 'assistant', content: 'ok' },
        user('Second: beta'),
        ...toolTurn('t1'),
        { role: 'assistant', content: 'ok' },
        user('which? [[berth:recall_all]]'),
      ],
    })
    expect(a).toMatchObject({
      content: [{ type: 'text', text: 'The earlier prompts were: First: alpha | Second: beta' }],
    })
    expect(answer({ tools, messages: [user('[[berth:recall_all]]')] })).toMatchObject({
      content: [{ type: 'text', text: 'The earlier prompts were: (none)' }],
    })
  })

  it('[[berth:error KIND at=N]] fails from turn N on', () => {
    const prompt = user('x [[berth:tool Bash {}]] [[berth:error overloaded at=1]]')
    expect(answer({ tools, messages: [prompt] }).kind).toBe('message')
    expect(answer({ tools, messages: [prompt, ...toolTurn('t1')] })).toMatchObject({
      kind: 'error',
      error: 'overloaded',
    })
  })

  it('is deterministic', () => {
    const req = { tools, messages: [user('same [[berth:tool Bash {"command":"ls"}]]')] }
    expect(answer(req)).toEqual(answer(req))
  })

  it('[[berth:json VALUE]] answers through the StructuredOutput tool, again while it is rejected', () => {
    const offered = [{ name: 'Bash' }, { name: 'StructuredOutput' }]
    const prompt = user('Which berth? [[berth:json {"berth":7}]]')
    const first = answer({ tools: offered, messages: [prompt] })
    expect(first).toMatchObject({
      stop_reason: 'tool_use',
      content: [{ type: 'text' }, { type: 'tool_use', name: 'StructuredOutput', input: { berth: 7 } }],
    })
    const rejected: MessageParam[] = [
      prompt,
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'StructuredOutput', input: { berth: 7 } }] },
      user([{ type: 'tool_result', tool_use_id: 't1', content: 'does not match the schema', is_error: true }]),
    ]
    expect(answer({ tools: offered, messages: rejected })).toMatchObject({
      content: [{ type: 'text' }, { type: 'tool_use', name: 'StructuredOutput', input: { berth: 7 } }],
    })
    // Without the tool (no output_schema) the value is the answer's text.
    expect(answer({ tools, messages: [prompt] })).toMatchObject({ content: [{ type: 'text', text: '{"berth":7}' }] })
    expect(() => parseScript('[[berth:json {oops}]]')).toThrow(DirectiveError)
  })

  it('[[berth:reply_last_user]] quotes the latest message, also one handed over beside a tool result', () => {
    const prompt = user('Work [[berth:tool Bash {"command":"sleep 1"}]] [[berth:reply_last_user]] [[berth:text Done.]]')
    const midTurn =
      'ok\n\n<system-reminder>\nThe user sent a new message while you were working:\nUse the blue harbour\n\nAddress it.\n</system-reminder>'
    const messages: MessageParam[] = [
      prompt,
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: {} }] },
      user([{ type: 'tool_result', tool_use_id: 't1', content: midTurn }]),
    ]
    expect(answer({ tools, messages })).toMatchObject({
      content: [{ type: 'text', text: 'Done.\nLast message: Use the blue harbour' }],
    })
    expect(readConversation(messages).lastUserText).toBe('Use the blue harbour')
    // With no message since, the latest is the prompt itself.
    expect(readConversation([prompt, ...toolTurn('t2')]).lastUserText).toContain('Work')
  })

  it('[[berth:echo_last_result]] quotes the latest tool result, reminders left out', () => {
    const messages: MessageParam[] = [
      user('Try [[berth:tool Bash {"command":"x"}]] [[berth:echo_last_result]] [[berth:text Tried.]]'),
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: {} }] },
      user([
        {
          type: 'tool_result',
          tool_use_id: 't1',
          content: [{ type: 'text', text: 'Denied: not on a Friday<system-reminder>noise</system-reminder>' }],
          is_error: true,
        },
      ]),
    ]
    expect(answer({ tools, messages })).toMatchObject({
      content: [{ type: 'text', text: 'Tried.\nLast tool result: Denied: not on a Friday' }],
    })
  })

  it('[[berth:notifications]] lists the background-task notifications Claude Code put in the conversation', () => {
    const notice = (summary: string) =>
      user(
        `<system-reminder>\n[SYSTEM NOTIFICATION - NOT USER INPUT]\n<task-notification>\n<task-id>b1</task-id>\n<status>completed</status>\n<summary>${summary}</summary>\n</task-notification>\n</system-reminder>`,
      )
    const ask = user('Anything? [[berth:text Checked.]] [[berth:notifications]]')
    expect(answer({ tools, messages: [ask] })).toMatchObject({
      content: [{ type: 'text', text: 'Checked.\nNotifications: (none)' }],
    })
    const messages: MessageParam[] = [
      user('Build.'),
      { role: 'assistant', content: [{ type: 'text', text: 'Started.' }] },
      notice('Background command "make" completed (exit code 0)'),
      { role: 'assistant', content: [{ type: 'text', text: 'Noted.' }] },
      ask,
    ]
    expect(answer({ tools, messages })).toMatchObject({
      content: [{ type: 'text', text: 'Checked.\nNotifications: Background command "make" completed (exit code 0)' }],
    })
  })
})
