/**
 * Relaying the provider's answer to the agent. Without a budget to hold, chunks pass as
 * they come and are metered after; with one, a streamed answer passes event by event, each
 * metered first, and the stream ends with an `error` event in Anthropic's shape at the
 * first event that would take the call past what its budgets have left.
 */
import type { ServerResponse } from 'node:http'
import type { GatewayErrorType } from './gateway-http.js'
import type { AnswerUsage, SseMeter, UsageReader } from './gateway-usage.js'

/** What a budget-held stream asks at each event: null to go on, or why it ends there. */
export type StreamCheck = (usage: AnswerUsage) => { type: GatewayErrorType; message: string } | null

/** Resolves once the client can take more bytes, or has gone. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done)
      res.off('close', done)
      resolve()
    }
    res.on('drain', done)
    res.on('close', done)
  })
}

/**
 * An error as a streamed answer carries it (the SDKs throw it as an API error).
 *
 * @example
 * ```ts
 * res.end(errorEvent('invalid_request_error', "Berth model gateway: this task's budget of $0.5 is spent"))
 * ```
 */
export function errorEvent(type: GatewayErrorType, message: string): string {
  return `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type, message } })}\n\n`
}

/**
 * Copy `body` to `res`, feeding `reader`; with `check` (and an SSE `reader`), event by
 * event, ending at the first event `check` refuses. Resolves with the refusal when it cut
 * the answer; rejects when the provider's stream failed (the response is then destroyed).
 *
 * @example
 * ```ts
 * const cut = await relayAnswer(upstream.body, res, sseUsageReader(), (u) => (costOf(m, u.usage) > 1 ? over : null))
 * ```
 */
export async function relayAnswer(
  body: ReadableStream<Uint8Array> | null,
  res: ServerResponse,
  reader: UsageReader | SseMeter | undefined,
  check: StreamCheck | undefined,
): Promise<{ type: GatewayErrorType; message: string } | null> {
  const meter = check && reader && 'split' in reader ? reader : undefined
  const chunks = body?.getReader()
  while (chunks) {
    const { done, value } = await chunks.read()
    if (done) break
    if (res.destroyed) {
      await chunks.cancel()
      break
    }
    if (!meter || !check) {
      // The client gets the bytes first; metering reads them after.
      if (!res.write(value)) await drained(res)
      reader?.push(value)
      continue
    }
    const pass: Uint8Array[] = []
    let cut: ReturnType<StreamCheck> = null
    for (const event of meter.split(value)) {
      // Events after a cut are still read: the provider sent them, so they are billed.
      meter.read(event)
      if (cut) continue
      const usage = meter.now()
      cut = usage ? check(usage) : null
      if (!cut) pass.push(event)
    }
    if (pass.length && !res.write(pass.length === 1 ? pass[0]! : Buffer.concat(pass))) await drained(res)
    if (cut) {
      res.end(meter.errorEvent?.(cut.type, cut.message) ?? errorEvent(cut.type, cut.message))
      await chunks.cancel()
      return cut
    }
  }
  res.end()
  return null
}
