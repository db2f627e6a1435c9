/**
 * Usage out of Bedrock's streamed answer. `invoke-with-response-stream` answers in AWS
 * event-stream framing (`application/vnd.amazon.eventstream`): binary messages with
 * headers and CRCs, each `chunk` event's payload `{"bytes":"<base64>"}` holding one event
 * of the Messages API (`message_start`, …, `message_delta` with usage). The messages are
 * decoded with `@smithy/eventstream-codec` (which checks their CRCs), their events handed
 * to the Messages API's SSE reader.
 */
import { EventStreamCodec } from '@smithy/eventstream-codec'
import { fromUtf8, toUtf8 } from '@smithy/util-utf8'
import { sseUsageReader, type UsageReader } from '../gateway-usage.js'

/** A message longer than this is no usage event: the stream stops being read (it still passes through). */
const MAX_MESSAGE = 16 << 20
/** Prelude (total and headers length, CRC) and the message CRC. */
const MIN_MESSAGE = 16

/**
 * A reader of Bedrock's event stream: every `chunk` event's Messages API event, to the SSE
 * usage reader. A stream that stops making sense (a bad length or CRC) is read no further.
 *
 * @example
 * ```ts
 * const reader = eventStreamUsageReader()
 * for await (const chunk of body) { res.write(chunk); reader.push(chunk) }
 * reader.end()?.usage.output_tokens
 * ```
 */
export function eventStreamUsageReader(): UsageReader {
  const codec = new EventStreamCodec(toUtf8, fromUtf8)
  const sse = sseUsageReader()
  const encoder = new TextEncoder()
  let pending: Buffer = Buffer.alloc(0)
  let broken = false

  const message = (bytes: Uint8Array) => {
    const { headers, body } = codec.decode(bytes)
    if (headers[':message-type']?.value !== 'event' || headers[':event-type']?.value !== 'chunk') return
    const payload = JSON.parse(toUtf8(body)) as { bytes?: unknown }
    if (typeof payload.bytes !== 'string') return
    const event = Buffer.from(payload.bytes, 'base64').toString('utf8')
    sse.push(encoder.encode(`data: ${event.replace(/\n/g, ' ')}\n\n`))
  }

  return {
    push(chunk) {
      if (broken) return
      pending = pending.length ? Buffer.concat([pending, chunk]) : Buffer.from(chunk)
      try {
        while (pending.length >= 4) {
          const total = pending.readUInt32BE(0)
          if (total < MIN_MESSAGE || total > MAX_MESSAGE) throw new Error(`event-stream message of ${total} bytes`)
          if (pending.length < total) break
          message(pending.subarray(0, total))
          pending = pending.subarray(total)
        }
      } catch {
        broken = true
        pending = Buffer.alloc(0)
      }
    },
    end: () => sse.end(),
  }
}
