import { createHash } from 'node:crypto'
import { readConversation, type MessageParam } from './conversation.js'
import { parseScript, stripDirectives, type ErrorKind } from './directives.js'

/** A content block of a planned answer. */
export type AnswerBlock =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }

/** What the model answers one request with, before it is encoded as JSON or SSE. */
export type Answer =
  | {
      kind: 'message'
      id: string
      model: string
      content: AnswerBlock[]
      stop_reason: 'end_turn' | 'tool_use'
      usage: { input_tokens: number; output_tokens: number }
      /** Milliseconds before each streamed delta. */
      slowMs: number
    }
  | { kind: 'error'; error: ErrorKind; message: string }

/** The fields of a `POST /v1/messages` body the model reads. */
export interface MessagesRequest {
  model?: string
  messages?: MessageParam[]
  tools?: { name: string }[]
  stream?: boolean
}

/** The harmless call `[[berth:turns N]]` pads with. */
export const FILLER_TOOL = 'Bash'

/** The tool Claude Code offers for structured output (`outputFormat: json_schema`). */
export const STRUCTURED_OUTPUT_TOOL = 'StructuredOutput'

const tokensOf = (chars: number) => Math.max(1, Math.ceil(chars / 4))

function id(prefix: string, ...parts: (string | number)[]): string {
  return prefix + createHash('sha256').update(parts.join('\u0000')).digest('hex').slice(0, 24)
}

function summary(prompt: string): string {
  const said = stripDirectives(prompt)
  if (!said) return 'Offline model here. Nothing to do.'
  const short = said.length > 200 ? `${said.slice(0, 200)}...` : said
  return `Offline model here. You said: ${short}`
}

/**
 * Decide the answer to one Messages API request from the directives of its latest user
 * prompt and how far the tool loop got (see the testkit README for the language).
 * Pure: the same request always gets the same answer.
 *
 * @example
 * ```ts
 * const a = answer({ model: 'm', messages: [{ role: 'user', content: '[[berth:text Hi]]' }] })
 * // { kind: 'message', content: [{ type: 'text', text: 'Hi' }], stop_reason: 'end_turn', ... }
 * ```
 */
export function answer(req: MessagesRequest): Answer {
  const messages = req.messages ?? []
  const model = req.model ?? 'claude-offline'
  const convo = readConversation(messages)
  const script = parseScript(convo.prompt)
  if (script.error && convo.turn >= script.error.at) {
    return { kind: 'error', error: script.error.kind, message: `Scripted ${script.error.kind} error (offline model)` }
  }

  const content: AnswerBlock[] = []
  const calls = [...script.tools]
  while (calls.length < (script.turns ?? 0)) {
    calls.push({
      name: FILLER_TOOL,
      input: { command: `echo berth turn ${calls.length + 1}`, description: 'Harmless scripted turn' },
    })
  }
  // Side requests of the harness (no tools offered) only ever get text.
  const canCall = (req.tools?.length ?? 0) > 0
  // Structured output is a tool call after the scripted ones, repeated while Claude Code
  // rejects it (its retries), so an invalid value fails the way a real model's would.
  const structured = script.json !== undefined && canCall && req.tools!.some((t) => t.name === STRUCTURED_OUTPUT_TOOL)
  const call =
    canCall && convo.turn < calls.length
      ? calls[convo.turn]
      : structured
        ? { name: STRUCTURED_OUTPUT_TOOL, input: script.json as Record<string, unknown> }
        : undefined
  if (call) {
    const of = Math.max(calls.length, convo.turn + 1)
    content.push({ type: 'text', text: `Calling ${call.name} (step ${convo.turn + 1} of ${of}).` })
    content.push({
      type: 'tool_use',
      id: id('toolu_', messages.length, convo.prompt, convo.turn),
      name: call.name,
      input: call.input,
    })
  } else if (script.recallAll) {
    content.push({ type: 'text', text: `The earlier prompts were: ${convo.earlierPrompts.join(' | ') || '(none)'}` })
  } else if (script.recall) {
    content.push({ type: 'text', text: `The first prompt was: ${convo.firstPrompt}` })
  } else {
    const parts = [script.text ?? (script.json !== undefined ? JSON.stringify(script.json) : summary(convo.prompt))]
    if (script.echoLastResult) parts.push(`Last tool result: ${convo.lastToolResult}`)
    if (script.replyLastUser) parts.push(`Last message: ${convo.lastUserText}`)
    if (script.notifications) parts.push(`Notifications: ${convo.notifications.join(' | ') || '(none)'}`)
    content.push({ type: 'text', text: parts.join('\n') })
  }

  const outChars = content.reduce((n, b) => n + (b.type === 'text' ? b.text.length : JSON.stringify(b.input).length), 0)
  return {
    kind: 'message',
    id: id('msg_', messages.length, convo.prompt, convo.turn, JSON.stringify(content)),
    model,
    content,
    stop_reason: call ? 'tool_use' : 'end_turn',
    usage: {
      input_tokens: script.usage?.input ?? tokensOf(convo.size),
      output_tokens: script.usage?.output ?? tokensOf(outChars),
    },
    slowMs: script.slowMs ?? 0,
  }
}
