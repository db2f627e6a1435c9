/**
 * A local OTLP/HTTP receiver that keeps the spans a Berth server exports as JSON
 * (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/json`), grouped by trace. The standalone
 * server exports its task spans (`task.submit`, `task.queue`, `task.claim`,
 * `task.runner` with its `runner.first_event`, the gateway's `chat <model>`) through the
 * OpenTelemetry SDK it already wires, so a benchmark can time a task's steps from outside
 * the process, with no probe and no new API.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One received span; times are Unix epoch milliseconds (comparable with `Date.now()`). */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  start: number
  end: number
  attributes: Record<string, string | number | boolean>
  events: { name: string; at: number }[]
}

/** The receiver: spans by trace id, as they arrive. */
export interface SpanReceiver {
  /** The URL to set as `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`. */
  tracesUrl: string
  traces: Map<string, ReceivedSpan[]>
  close(): Promise<void>
}

interface OtlpValue {
  stringValue?: string
  intValue?: string | number
  doubleValue?: number
  boolValue?: boolean
}
interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  startTimeUnixNano: string | number
  endTimeUnixNano: string | number
  attributes?: { key: string; value: OtlpValue }[]
  events?: { name: string; timeUnixNano: string | number }[]
}
interface OtlpExport {
  resourceSpans?: { scopeSpans?: { spans?: OtlpSpan[] }[] }[]
}

const msOf = (nano: string | number) => Number(BigInt(nano) / 1000n) / 1000

function attributeValue(v: OtlpValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue
  if (v.intValue !== undefined) return Number(v.intValue)
  if (v.doubleValue !== undefined) return v.doubleValue
  return v.boolValue ?? ''
}

function toSpan(s: OtlpSpan): ReceivedSpan {
  return {
    traceId: s.traceId,
    spanId: s.spanId,
    ...(s.parentSpanId && { parentSpanId: s.parentSpanId }),
    name: s.name,
    start: msOf(s.startTimeUnixNano),
    end: msOf(s.endTimeUnixNano),
    attributes: Object.fromEntries((s.attributes ?? []).map((a) => [a.key, attributeValue(a.value)])),
    events: (s.events ?? []).map((e) => ({ name: e.name, at: msOf(e.timeUnixNano) })),
  }
}

/**
 * Start the receiver on 127.0.0.1.
 *
 * @example
 * ```ts
 * const spans = await startSpanReceiver()
 * spawn(server, { env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: spans.tracesUrl, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' } })
 * ```
 */
export async function startSpanReceiver(): Promise<SpanReceiver> {
  const traces = new Map<string, ReceivedSpan[]>()
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (d: Buffer) => chunks.push(d))
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpExport
        for (const rs of body.resourceSpans ?? [])
          for (const ss of rs.scopeSpans ?? [])
            for (const s of ss.spans ?? []) {
              const span = toSpan(s)
              const list = traces.get(span.traceId) ?? []
              list.push(span)
              traces.set(span.traceId, list)
            }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      } catch {
        // Protobuf or garbage: the server was not started with the JSON protocol.
        res.writeHead(400).end()
      }
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    tracesUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`,
    traces,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}
