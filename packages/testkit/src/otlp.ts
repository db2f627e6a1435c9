/**
 * An OTLP/HTTP trace receiver on loopback, for tests of what a service exports: it accepts
 * `POST /v1/traces` in the OTLP JSON mapping (`application/json`, gzip or not) and keeps
 * every span it was sent, flattened with its resource's attributes. Protobuf bodies are
 * refused with 415: point the exporter at it with the JSON protocol (`http/json`).
 */
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { gunzipSync } from 'node:zlib'
import { waitUntil } from './wait.js'

/** One received span, with ids as lowercase hex and attributes as plain values. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  /** Empty for a root span. */
  parentSpanId: string
  name: string
  /** OTLP's span kind number (1 internal, 2 server, 3 client, ...). */
  kind: number
  startTimeUnixNano: bigint
  endTimeUnixNano: bigint
  attributes: Record<string, unknown>
  /** OTLP's status code (0 unset, 1 ok, 2 error) and message. */
  status: { code: number; message?: string }
  events: { name: string; attributes: Record<string, unknown> }[]
  /** The resource's attributes (`service.name`, ...). */
  resource: Record<string, unknown>
  scope: string
}

/** A running receiver. */
export interface OtlpReceiver {
  /** The base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT` (the exporter adds `/v1/traces`). */
  url: string
  /** The traces endpoint itself, for an exporter's `url` option. */
  tracesUrl: string
  /** Every span received so far, in arrival order. */
  readonly spans: ReceivedSpan[]
  /** Resolves with the spans once `predicate` holds for what was received (polled; default timeout 20 s). */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean, opts?: { timeoutMs?: number }): Promise<ReceivedSpan[]>
  close(): Promise<void>
}

type AnyValue = {
  stringValue?: string
  boolValue?: boolean
  intValue?: string | number
  doubleValue?: number
  arrayValue?: { values?: AnyValue[] }
  kvlistValue?: { values?: KeyValue[] }
  bytesValue?: string
}
type KeyValue = { key: string; value?: AnyValue }

function plainValue(v: AnyValue | undefined): unknown {
  if (!v) return undefined
  if (v.stringValue !== undefined) return v.stringValue
  if (v.boolValue !== undefined) return v.boolValue
  if (v.intValue !== undefined) return Number(v.intValue)
  if (v.doubleValue !== undefined) return v.doubleValue
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(plainValue)
  if (v.kvlistValue) return attributesOf(v.kvlistValue.values)
  return v.bytesValue
}

function attributesOf(list: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, plainValue(kv.value)]))
}

/** OTLP JSON carries ids as hex; some encoders send base64 (the protobuf JSON default): both read as hex. */
function hexId(id: string | undefined): string {
  if (!id) return ''
  return /^[0-9a-f]+$/i.test(id) && (id.length === 32 || id.length === 16)
    ? id.toLowerCase()
    : Buffer.from(id, 'base64').toString('hex')
}

interface RawSpan {
  traceId?: string
  spanId?: string
  parentSpanId?: string
  name?: string
  kind?: number
  startTimeUnixNano?: string | number
  endTimeUnixNano?: string | number
  attributes?: KeyValue[]
  status?: { code?: number; message?: string }
  events?: { name?: string; attributes?: KeyValue[] }[]
}

interface ExportRequest {
  resourceSpans?: {
    resource?: { attributes?: KeyValue[] }
    scopeSpans?: { scope?: { name?: string }; spans?: RawSpan[] }[]
  }[]
}

function spansOf(body: ExportRequest): ReceivedSpan[] {
  return (body.resourceSpans ?? []).flatMap((rs) => {
    const resource = attributesOf(rs.resource?.attributes)
    return (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        traceId: hexId(s.traceId),
        spanId: hexId(s.spanId),
        parentSpanId: hexId(s.parentSpanId),
        name: s.name ?? '',
        kind: s.kind ?? 0,
        startTimeUnixNano: BigInt(s.startTimeUnixNano ?? 0),
        endTimeUnixNano: BigInt(s.endTimeUnixNano ?? 0),
        attributes: attributesOf(s.attributes),
        status: { code: s.status?.code ?? 0, ...(s.status?.message && { message: s.status.message }) },
        events: (s.events ?? []).map((e) => ({ name: e.name ?? '', attributes: attributesOf(e.attributes) })),
        resource,
        scope: ss.scope?.name ?? '',
      })),
    )
  })
}

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const raw = Buffer.concat(chunks)
  return req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw
}

/**
 * Start a receiver on `127.0.0.1` (a free port unless `port` is given).
 *
 * @example
 * ```ts
 * const otlp = await startOtlpReceiver()
 * process.env.OTEL_EXPORTER_OTLP_ENDPOINT = otlp.url
 * // ... run what exports traces
 * const spans = await otlp.waitFor((s) => s.some((span) => span.name === 'task.run'))
 * await otlp.close()
 * ```
 */
export async function startOtlpReceiver(opts: { port?: number } = {}): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const server = createServer((req, res) => {
    const answer = (status: number, body: object) => {
      res.writeHead(status, { 'content-type': 'application/json' })
      res.end(JSON.stringify(body))
    }
    if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/traces') {
      req.resume()
      return answer(404, { message: 'only POST /v1/traces' })
    }
    if (!req.headers['content-type']?.startsWith('application/json')) {
      req.resume()
      return answer(415, { message: 'this receiver reads the OTLP JSON mapping only (application/json)' })
    }
    bodyOf(req).then(
      (raw) => {
        let parsed: ExportRequest
        try {
          parsed = JSON.parse(raw.toString('utf8')) as ExportRequest
        } catch {
          return answer(400, { message: 'body is not JSON' })
        }
        spans.push(...spansOf(parsed))
        answer(200, { partialSuccess: {} })
      },
      () => answer(400, { message: 'unreadable body' }),
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve())
  })
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    tracesUrl: `${url}/v1/traces`,
    spans,
    async waitFor(predicate, o = {}) {
      await waitUntil(() => predicate(spans), { timeout: o.timeoutMs ?? 20_000, what: 'the spans expected' })
      return spans
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
