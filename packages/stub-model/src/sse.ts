import type { Answer, AnswerBlock } from './respond.js'

type MessageAnswer = Extract<Answer, { kind: 'message' }>

/** One server-sent event of the Messages streaming API. */
export interface StreamEvent {
  event: string
  data: Record<string, unknown>
}

/** Split text into a few deltas (words with their trailing space), like a model streams. */
function textChunks(text: string): string[] {
  const words = text.match(/\S+\s*|\s+/g) ?? ['']
  const chunks: string[] = []
  for (let i = 0; i < words.length; i += 3) chunks.push(words.slice(i, i + 3).join(''))
  return chunks
}

function jsonChunks(json: string): string[] {
  const size = Math.max(8, Math.ceil(json.length / 3))
  const chunks: string[] = []
  for (let i = 0; i < json.length; i += size) chunks.push(json.slice(i, i + size))
  return chunks.length ? chunks : ['']
}

function usage(input: number, output: number) {
  return { input_tokens: input, output_tokens: output, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
}

function blockEvents(block: AnswerBlock, index: number): StreamEvent[] {
  const events: StreamEvent[] = []
  if (block.type === 'text') {
    events.push({
      event: 'content_block_start',
      data: { type: 'content_block_start', index, content_block: { type: 'text', text: '' } },
    })
    for (const text of textChunks(block.text)) {
      events.push({
        event: 'content_block_delta',
        data: { type: 'content_block_delta', index, delta: { type: 'text_delta', text } },
      })
    }
  } else {
    events.push({
      event: 'content_block_start',
      data: {
        type: 'content_block_start',
        index,
        content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
      },
    })
    for (const partial_json of jsonChunks(JSON.stringify(block.input))) {
      events.push({
        event: 'content_block_delta',
        data: { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json } },
      })
    }
  }
  events.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } })
  return events
}

/**
 * The answer as the Messages API streams it: `message_start`, a `ping`, per block
 * `content_block_start` / `content_block_delta` (`text_delta`, `input_json_delta`) /
 * `content_block_stop`, then `message_delta` (stop reason, final usage) and `message_stop`.
 *
 * @example
 * ```ts
 * for (const e of streamEvents(a)) res.write(encodeEvent(e))
 * ```
 */
export function streamEvents(a: MessageAnswer): StreamEvent[] {
  const start = {
    id: a.id,
    type: 'message',
    role: 'assistant',
    model: a.model,
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage: usage(a.usage.input_tokens, 1),
  }
  return [
    { event: 'message_start', data: { type: 'message_start', message: start } },
    { event: 'ping', data: { type: 'ping' } },
    ...a.content.flatMap((b, i) => blockEvents(b, i)),
    {
      event: 'message_delta',
      data: {
        type: 'message_delta',
        delta: { stop_reason: a.stop_reason, stop_sequence: null },
        usage: usage(a.usage.input_tokens, a.usage.output_tokens),
      },
    },
    { event: 'message_stop', data: { type: 'message_stop' } },
  ]
}

/**
 * One event in the SSE wire format.
 *
 * @example
 * ```ts
 * encodeEvent({ event: 'ping', data: { type: 'ping' } }) // 'event: ping\ndata: {"type":"ping"}\n\n'
 * ```
 */
export function encodeEvent(e: StreamEvent): string {
  return `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`
}

/**
 * The answer as a non-streaming Messages API response body.
 *
 * @example
 * ```ts
 * res.end(JSON.stringify(messageBody(a)))
 * ```
 */
export function messageBody(a: MessageAnswer): Record<string, unknown> {
  return {
    id: a.id,
    type: 'message',
    role: 'assistant',
    model: a.model,
    content: a.content,
    stop_reason: a.stop_reason,
    stop_sequence: null,
    usage: usage(a.usage.input_tokens, a.usage.output_tokens),
  }
}
