/**
 * Reading token usage out of a Messages API answer while its bytes pass through the model
 * gateway: the gateway writes every chunk to the client first and hands it here second, so
 * metering never delays a token.
 */
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

/** A line longer than this is not usage (those are a few hundred bytes): it is skipped, not kept. */
const MAX_SSE_LINE = 1 << 20
/** A JSON answer longer than this is passed through unread (answers are far smaller). */
const MAX_JSON_BODY = 16 << 20

/**
 * A reader for a streamed answer (`text/event-stream`): usage comes from
 * `message_start.message.usage`, then every `message_delta.usage` replaces what it
 * carries. Only `data:` lines mentioning usage are parsed; text deltas are skipped unread.
 *
 * @example
 * ```ts
 * const reader = sseUsageReader()
 * for await (const chunk of body) { res.write(chunk); reader.push(chunk) }
 * reader.end() // { model: 'claude-sonnet-4-5', usage: { input_tokens: 12, output_tokens: 40, ... } }
 * ```
 */
export function sseUsageReader(): UsageReader {
  const decoder = new TextDecoder()
  const usage = emptyUsage()
  let model: string | undefined
  let seen = false
  let partial = ''
  let skipping = false

  const line = (text: string) => {
    if (!text.startsWith('data:') || !text.includes('usage')) return
    let event: { type?: unknown; message?: { model?: unknown; usage?: unknown }; usage?: unknown }
    try {
      event = JSON.parse(text.slice(5))
    } catch {
      return
    }
    if (event.type === 'message_start' && event.message) {
      if (typeof event.message.model === 'string') model = event.message.model
      merge(usage, event.message.usage)
      seen = true
    } else if (event.type === 'message_delta') {
      merge(usage, event.usage)
      seen = true
    }
  }

  const feed = (text: string) => {
    let start = 0
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      const piece = text.slice(start, nl)
      if (!skipping) line((partial + piece).replace(/\r$/, ''))
      partial = ''
      skipping = false
      start = nl + 1
    }
    if (skipping) return
    partial += text.slice(start)
    if (partial.length > MAX_SSE_LINE) {
      partial = ''
      skipping = true
    }
  }

  return {
    push: (chunk) => feed(decoder.decode(chunk, { stream: true })),
    end: () => {
      feed(`${decoder.decode()}\n`)
      return seen ? { model, usage } : undefined
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
