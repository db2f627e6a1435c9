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
})
