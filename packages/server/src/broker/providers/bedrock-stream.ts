/**
 * Usage out of Bedrock's streamed answer. `invoke-with-response-stream` answers in AWS
 * event-stream framing (`application/vnd.amazon.eventstream`): binary messages with
 * headers and CRCs, each `chunk` event's payload `{"bytes":"<base64>"}` holding one event
 * of the Messages API (`message_start`, …, `message_delta` with usage). The messages are
 * decoded with `@smithy/eventstream-codec` (which checks their CRCs), their events read by
 * the Messages API's SSE meter; a budget that ends the stream ends it between two
 * messages, with an exception message as Bedrock would send one.
 */
import { EventStreamCodec } from '@smithy/eventstream-codec'
import { fromUtf8, toUtf8 } from '@smithy/util-utf8'
import type { GatewayErrorType } from '../gateway-http.js'
import { sseUsageReader, type SseMeter } from '../gateway-usage.js'

/** A message longer than this is no usage event: the stream is read no further (it still passes through). */
const MAX_MESSAGE = 16 << 20
/** Prelude (total and headers length, CRC) and the message CRC. */
const MIN_MESSAGE = 16

/** Bedrock's exception for each error the gateway ends a stream with. */
const EXCEPTIONS: Partial<Record<GatewayErrorType, string>> = {
  invalid_request_error: 'validationException',
  authentication_error: 'accessDeniedException',
  permission_error: 'accessDeniedException',
}

/**
 * A meter of Bedrock's event stream: split into whole messages, every `chunk` event's
 * Messages API event read by the SSE meter. A stream that stops making sense (a bad length
 * or CRC) is read no further and passes through as it comes.
 *
 * @example
 * ```ts
 * const reader = eventStreamUsageReader()
 * for await (const chunk of body) { res.write(chunk); reader.push(chunk) }
 * reader.end()?.usage.output_tokens
 * ```
 */
export function eventStreamUsageReader(): SseMeter {
  const codec = new EventStreamCodec(toUtf8, fromUtf8)
  const sse = sseUsageReader()
  const encoder = new TextEncoder()
  let held: Buffer = Buffer.alloc(0)
  let broken = false

  const split = (chunk: Uint8Array): Uint8Array[] => {
    if (broken) return [chunk]
    const bytes = held.length ? Buffer.concat([held, chunk]) : Buffer.from(chunk)
    const messages: Uint8Array[] = []
    let start = 0
    while (bytes.length - start >= 4) {
      const total = bytes.readUInt32BE(start)
      if (total < MIN_MESSAGE || total > MAX_MESSAGE) {
        broken = true
        break
      }
      if (bytes.length - start < total) break
      messages.push(bytes.subarray(start, start + total))
      start += total
    }
    held = bytes.subarray(start)
    if (broken) {
      messages.push(held)
      held = Buffer.alloc(0)
    }
    return messages
  }

  const read = (message: Uint8Array) => {
    if (broken) return
    try {
      const { headers, body } = codec.decode(message)
      if (headers[':message-type']?.value !== 'event' || headers[':event-type']?.value !== 'chunk') return
      const payload = JSON.parse(toUtf8(body)) as { bytes?: unknown }
      if (typeof payload.bytes !== 'string') return
      const event = Buffer.from(payload.bytes, 'base64').toString('utf8')
      sse.read(encoder.encode(`data: ${event.replace(/\n/g, ' ')}\n\n`))
    } catch {
      broken = true
    }
  }

  return {
    split,
    read,
    now: () => sse.now(),
    push: (chunk) => {
      for (const message of split(chunk)) read(message)
    },
    end: () => sse.end(),
    errorEvent: (type, message) =>
      codec.encode({
        headers: {
          ':message-type': { type: 'string', value: 'exception' },
          ':exception-type': { type: 'string', value: EXCEPTIONS[type] ?? 'internalServerException' },
          ':content-type': { type: 'string', value: 'application/json' },
        },
        body: fromUtf8(JSON.stringify({ message })),
      }),
  }
}
