/**
 * Reading token usage out of a Messages API answer while its bytes pass through the model
 * gateway. Without a budget to hold, the gateway writes every chunk to the client first and
 * hands it here second, so metering never delays a token; with one, a stream is metered
 * event by event before each is passed on, so the gateway can end it at the budget.
 */
import type { GatewayErrorType } from './gateway-http.js'
import { emptyUsage, mergeUsage as merge, type TokenUsage } from './gateway-prices.js'

/** What one answer reported: the model that answered and its usage. */
export interface AnswerUsage {
  model: string | undefined
  usage: TokenUsage
}

/** Fed the answer's bytes as they pass; `end()` says what usage they carried (undefined: none). */
export interface UsageReader {
  push(chunk: Uint8Array): void
  end(): AnswerUsage | undefined
}

/** An event longer than this is not usage (those are a few hundred bytes): it is passed on unread, not kept. */
const MAX_SSE_LINE = 1 << 20
/** A JSON answer longer than this is passed through unread (answers are far smaller). */
const MAX_JSON_BODY = 16 << 20

/**
 * Output tokens estimated from streamed content while the provider has not reported them
 * yet: one token per 3 bytes of text, thinking or tool input (Claude's tokenizer averages
 * 3.5 to 4 characters a token on English and code), so an estimate errs on the dear side.
 */
export const ESTIMATED_BYTES_PER_TOKEN = 3

/** A reader of a streamed answer that also splits it into whole events and says what it used so far. */
export interface SseMeter extends UsageReader {
  /** The whole events `chunk` completes (bytes held from earlier chunks first); an unfinished one is held. */
  split(chunk: Uint8Array): Uint8Array[]
  /** Read one whole event (from {@link SseMeter.split}): its usage, and its content for the estimate. */
  read(event: Uint8Array): void
  /** Usage so far (undefined before any): as reported, plus output estimated from content streamed since. */
  now(): AnswerUsage | undefined
  /** How this stream carries an error that ends it (default: an SSE `error` event; Bedrock frames its own). */
  errorEvent?(type: GatewayErrorType, message: string): Uint8Array
}

const LF = 0x0a
const CR = 0x0d

/** The end of the first blank line (`\n\n` or `\r\n\r\n`) in `bytes` from `from`, or -1. */
function eventEnd(bytes: Uint8Array, from: number): number {
  for (let i = bytes.indexOf(LF, from); i >= 0; i = bytes.indexOf(LF, i + 1)) {
    if (bytes[i + 1] === LF) return i + 2
    if (bytes[i + 1] === CR && bytes[i + 2] === LF) return i + 3
  }
  return -1
}

/** An event's `data:` lines joined, as the SSE format says. */
function dataOf(event: string): string {
  let data: string | undefined
  for (const raw of event.split('\n')) {
    const line = raw.replace(/\r$/, '')
    if (!line.startsWith('data:')) continue
    const value = line.slice(line[5] === ' ' ? 6 : 5)
    data = data === undefined ? value : `${data}\n${value}`
  }
  return data ?? ''
}

type StreamEvent = {
  type?: unknown
  message?: { model?: unknown; usage?: unknown }
  usage?: unknown
  delta?: { text?: unknown; partial_json?: unknown; thinking?: unknown }
}

/**
 * A reader for a streamed answer (`text/event-stream`): usage comes from
 * `message_start.message.usage`, then every `message_delta.usage` replaces what it
 * carries. Between reports, the text, thinking and tool input of `content_block_delta`
 * events count as output at {@link ESTIMATED_BYTES_PER_TOKEN}; a report replaces the
 * estimate, so an answer read to its end is metered as the provider said, and one cut
 * short as far as it went. Split into whole events, it lets the gateway meter each event
 * before passing it on.
 *
 * @example
 * ```ts
 * const reader = sseUsageReader()
 * for await (const chunk of body) { res.write(chunk); reader.push(chunk) }
 * reader.end() // { model: 'claude-sonnet-4-5', usage: { input_tokens: 12, output_tokens: 40, ... } }
 * ```
 */
export function sseUsageReader(): SseMeter {
  const decoder = new TextDecoder()
  const usage = emptyUsage()
  let model: string | undefined
  let seen = false
  let held: Uint8Array = new Uint8Array(0)
  /** Content bytes streamed since the provider last reported output tokens. */
  let unreported = 0

  const split = (chunk: Uint8Array): Uint8Array[] => {
    const bytes = held.length ? Buffer.concat([held, chunk]) : chunk
    const events: Uint8Array[] = []
    let start = 0
    // A blank line may straddle the chunks: search from just before the new bytes.
    for (let end = eventEnd(bytes, Math.max(0, held.length - 2)); end >= 0; end = eventEnd(bytes, start)) {
      events.push(bytes.subarray(start, end))
      start = end
    }
    held = bytes.subarray(start)
    // An event this long is not the API's: passed on as it is, and read as nothing.
    if (held.length > MAX_SSE_LINE) {
      events.push(held)
      held = new Uint8Array(0)
    }
    return events
  }

  const read = (bytes: Uint8Array) => {
    if (bytes.length > MAX_SSE_LINE) return
    const text = decoder.decode(bytes)
    if (!text.includes('usage') && !text.includes('content_block_delta')) return
    let event: StreamEvent
    try {
      event = JSON.parse(dataOf(text))
    } catch {
      return
    }
    if (typeof event !== 'object' || event === null) return
    if (event.type === 'content_block_delta' && event.delta) {
      const { text: t, partial_json: json, thinking } = event.delta
      for (const part of [t, json, thinking]) if (typeof part === 'string') unreported += Buffer.byteLength(part)
    } else if (event.type === 'message_start' && event.message) {
      if (typeof event.message.model === 'string') model = event.message.model
      merge(usage, event.message.usage)
      seen = true
      unreported = 0
    } else if (event.type === 'message_delta') {
      merge(usage, event.usage)
      seen = true
      unreported = 0
    }
  }

  const now = (): AnswerUsage | undefined => {
    if (!seen && unreported === 0) return undefined
    const estimated = Math.ceil(unreported / ESTIMATED_BYTES_PER_TOKEN)
    return { model, usage: { ...usage, output_tokens: usage.output_tokens + estimated } }
  }

  return {
    split,
    read,
    now,
    push: (chunk) => {
      for (const event of split(chunk)) read(event)
    },
    end: () => {
      // What is left is the last event, whether or not a blank line closed it.
      if (held.length) read(held)
      held = new Uint8Array(0)
      return now()
    },
  }
}

/**
 * A reader for a whole JSON answer (`stream: false`): the body's `model` and `usage`.
 *
 * @example
 * ```ts
 * const reader = jsonUsageReader()
 * reader.push(new TextEncoder().encode('{"type":"message","model":"m","usage":{"input_tokens":3,"output_tokens":5}}'))
 * reader.end()?.usage.output_tokens // 5
 * ```
 */
export function jsonUsageReader(): UsageReader {
  const chunks: Uint8Array[] = []
  let size = 0
  return {
    push: (chunk) => {
      size += chunk.byteLength
      if (size <= MAX_JSON_BODY) chunks.push(chunk)
    },
    end: () => {
      if (size > MAX_JSON_BODY) return undefined
      let body: { model?: unknown; usage?: unknown }
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      } catch {
        return undefined
      }
      if (typeof body?.usage !== 'object' || body.usage === null) return undefined
      const usage = emptyUsage()
      merge(usage, body.usage)
      return { model: typeof body.model === 'string' ? body.model : undefined, usage }
    },
  }
}
