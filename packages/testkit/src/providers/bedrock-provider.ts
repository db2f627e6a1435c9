import { createHash, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { EventStreamCodec } from '@smithy/eventstream-codec'
import { Hash } from '@smithy/hash-node'
import { SignatureV4 } from '@smithy/signature-v4'
import { fromUtf8, toUtf8 } from '@smithy/util-utf8'
import { answer, API_ERRORS, messageBody, streamEvents, type Answer, type MessagesRequest } from '@berth/stub-model'

/** The AWS credentials a fake Bedrock accepts. */
export interface FakeAwsCredentials {
  accessKeyId: string
  secretAccessKey: string
  /** With temporary credentials: the session token requests must carry (`x-amz-security-token`). */
  sessionToken?: string
}

/** Options of {@link startFakeBedrock}. */
export interface FakeBedrockOptions {
  /** The one access key it knows. */
  credentials: FakeAwsCredentials
  /** The region requests must be signed for (default `us-east-1`). */
  region?: string
  /** The model ids it serves; anything else is a ValidationException (default: any id). */
  models?: string[]
  host?: string
  port?: number
}

/** One request the fake received, and what it made of it. */
export interface FakeBedrockRequest {
  method: string
  path: string
  /** The model id the path names (decoded), when it names one. */
  model: string | null
  /** The parsed JSON body. */
  body: unknown
  /** Whether the SigV4 signature held. */
  signed: boolean
  /** The status it answered. */
  status: number
  /** Every header, as received (the signature, no secret). */
  headers: Record<string, string | string[] | undefined>
}

/** A running fake Bedrock runtime. */
export interface FakeBedrock {
  /** Base URL, e.g. `http://127.0.0.1:43123` (a credential's `base_url`). */
  url: string
  requests: FakeBedrockRequest[]
  close(): Promise<void>
}

const INVOKE = /^\/model\/([^/]+)\/(invoke|invoke-with-response-stream)$/
const SIGNATURE =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/
/** How far a request's `x-amz-date` may be from now, as AWS allows. */
const SKEW_MS = 5 * 60_000

/** A Bedrock error: its status, `x-amzn-errortype` and `{"message"}` body. */
function sendAwsError(res: ServerResponse, status: number, type: string, message: string): number {
  const body = JSON.stringify({ message })
  res.writeHead(status, {
    'content-type': 'application/json',
    'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
    'content-length': Buffer.byteLength(body),
  })
  res.end(body)
  return status
}

/** Bedrock's exception name for each scriptable error kind. */
const AWS_ERRORS: Record<string, string> = {
  overloaded: 'ServiceUnavailableException',
  api: 'InternalServerException',
  invalid: 'ValidationException',
  auth: 'AccessDeniedException',
  rate_limit: 'ThrottlingException',
}

function amzDate(value: string): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value)
  return m ? new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!)) : null
}

/**
 * Check a request's SigV4 signature the way Bedrock does: the access key, session token,
 * scope (date, region, service `bedrock`), freshness and body hash, then the signature,
 * recomputed with `@smithy/signature-v4` over the signed headers as received. Null when it
 * holds, else the exception and message to answer with.
 */
async function verify(
  req: IncomingMessage,
  body: string,
  o: FakeBedrockOptions,
): Promise<{ type: string; message: string } | null> {
  const auth = SIGNATURE.exec(req.headers.authorization ?? '')
  if (!auth) return { type: 'MissingAuthenticationTokenException', message: 'Missing Authentication Token' }
  const [, keyId, day, region, service, signedList, signature] = auth
  const token = req.headers['x-amz-security-token']
  if (keyId !== o.credentials.accessKeyId || (o.credentials.sessionToken ?? undefined) !== token)
    return { type: 'UnrecognizedClientException', message: 'The security token included in the request is invalid.' }
  const date = amzDate(String(req.headers['x-amz-date'] ?? ''))
  if (!date || Math.abs(Date.now() - date.getTime()) > SKEW_MS || !String(req.headers['x-amz-date']).startsWith(day!))
    return { type: 'InvalidSignatureException', message: 'Signature expired or not yet current.' }
  if (region !== (o.region ?? 'us-east-1') || service !== 'bedrock')
    return { type: 'InvalidSignatureException', message: `Credential should be scoped to a valid region and service.` }
  const declared = req.headers['x-amz-content-sha256']
  if (declared !== undefined && declared !== createHash('sha256').update(body).digest('hex'))
    return { type: 'InvalidSignatureException', message: "The provided 'x-amz-content-sha256' header does not match." }
  const url = new URL(req.url ?? '/', 'http://fake')
  const headers: Record<string, string> = {}
  for (const name of signedList!.split(';')) headers[name] = String(req.headers[name] ?? '')
  const [hostname, port] = (req.headers.host ?? '').split(':')
  const signer = new SignatureV4({
    service: 'bedrock',
    region: region!,
    credentials: { ...o.credentials },
    sha256: Hash.bind(null, 'sha256'),
  })
  const expected = await signer.sign(
    {
      method: req.method ?? 'POST',
      protocol: 'http:',
      hostname: hostname ?? '',
      ...(port && { port: Number(port) }),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers,
      body,
    },
    { signingDate: date },
  )
  const ours = /Signature=([0-9a-f]{64})$/.exec(expected.headers.authorization ?? '')?.[1] ?? ''
  const same = ours.length === signature!.length && timingSafeEqual(Buffer.from(ours), Buffer.from(signature!))
  if (!same)
    return {
      type: 'InvalidSignatureException',
      message:
        'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method.',
    }
  return null
}

/** The answer as `invoke-with-response-stream` frames it: one `chunk` event per Messages API event. */
function eventStream(a: Extract<Answer, { kind: 'message' }>): { delta: boolean; frame: Uint8Array }[] {
  const codec = new EventStreamCodec(toUtf8, fromUtf8)
  return streamEvents(a).map((e) => {
    const data =
      e.data.type === 'message_stop'
        ? {
            ...e.data,
            'amazon-bedrock-invocationMetrics': {
              inputTokenCount: a.usage.input_tokens,
              outputTokenCount: a.usage.output_tokens,
              invocationLatency: 1,
              firstByteLatency: 1,
            },
          }
        : e.data
    const payload = { bytes: Buffer.from(JSON.stringify(data)).toString('base64'), p: 'abcdefghijklmnop' }
    const frame = codec.encode({
      headers: {
        ':event-type': { type: 'string', value: 'chunk' },
        ':content-type': { type: 'string', value: 'application/json' },
        ':message-type': { type: 'string', value: 'event' },
      },
      body: fromUtf8(JSON.stringify(payload)),
    })
    return { delta: e.event === 'content_block_delta', frame }
  })
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Answer a signed request: a known model, a well-formed body, the offline model's answer. The status sent. */
async function invoke(
  res: ServerResponse,
  route: RegExpExecArray | null,
  entry: FakeBedrockRequest,
  o: FakeBedrockOptions,
): Promise<number> {
  if (!route) return sendAwsError(res, 404, 'UnknownOperationException', `Unknown operation ${entry.path}`)
  if (o.models && !o.models.includes(entry.model!))
    return sendAwsError(res, 400, 'ValidationException', 'The provided model identifier is invalid.')
  const request = entry.body as (MessagesRequest & { anthropic_version?: unknown; model?: unknown }) | undefined
  if (typeof request !== 'object' || request === null)
    return sendAwsError(res, 400, 'ValidationException', 'Malformed input request.')
  if (request.anthropic_version !== 'bedrock-2023-05-31' || 'model' in request)
    return sendAwsError(
      res,
      400,
      'ValidationException',
      'Malformed input request: anthropic_version must be bedrock-2023-05-31, and extraneous key [model] is not permitted',
    )
  // Bedrock reports the model as the Anthropic API names it.
  const model = entry.model!.replace(/^(?:[a-z-]+\.)?anthropic\./, '').replace(/-v\d+(?::\d+)?$/, '')
  const a = answer({ ...request, model })
  if (a.kind === 'error') {
    const status = API_ERRORS[a.error].status === 529 ? 503 : API_ERRORS[a.error].status
    return sendAwsError(res, status, AWS_ERRORS[a.error] ?? 'InternalServerException', a.message)
  }
  if (route[2] === 'invoke') {
    const json = JSON.stringify(messageBody(a))
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) })
    res.end(json)
    return 200
  }
  res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': 'fake' })
  for (const { delta, frame } of eventStream(a)) {
    if (res.destroyed) return 200
    if (a.slowMs && delta) await sleep(a.slowMs)
    res.write(frame)
  }
  res.end()
  return 200
}

/**
 * A local fake of Amazon Bedrock's runtime for Anthropic models, speaking its real
 * protocol: `POST /model/<id>/invoke` (JSON) and `/invoke-with-response-stream` (AWS
 * event-stream framing, each `chunk` a base64 Messages API event), answered by the offline
 * model's script (`[[berth:...]]` directives). Every request must be SigV4-signed for
 * service `bedrock` in the configured region with the configured key, as Bedrock checks
 * it (a wrong secret is an `InvalidSignatureException`, an unknown key or session token an
 * `UnrecognizedClientException`, both 403); the body must carry
 * `anthropic_version: "bedrock-2023-05-31"` and no `model`; an id not in `models` is a
 * `ValidationException`.
 *
 * @example
 * ```ts
 * const bedrock = await startFakeBedrock({ credentials: { accessKeyId: 'AKIA…', secretAccessKey: '…' } })
 * await api.apiKeys.create({ body: { name: 'aws', provider: 'bedrock', base_url: bedrock.url, aws_region: 'us-east-1', … } })
 * ```
 */
export async function startFakeBedrock(o: FakeBedrockOptions): Promise<FakeBedrock> {
  const requests: FakeBedrockRequest[] = []
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const raw = Buffer.concat(chunks).toString('utf8')
    const path = new URL(req.url ?? '/', 'http://fake').pathname
    const route = INVOKE.exec(path)
    let body: unknown
    try {
      body = raw ? JSON.parse(raw) : undefined
    } catch {
      body = undefined
    }
    const entry: FakeBedrockRequest = {
      method: req.method ?? 'GET',
      path,
      model: route ? decodeURIComponent(route[1]!) : null,
      body,
      signed: false,
      status: 0,
      headers: { ...req.headers },
    }
    requests.push(entry)
    const refused = await verify(req, raw, o)
    entry.signed = !refused
    entry.status = refused
      ? sendAwsError(res, 403, refused.type, refused.message)
      : await invoke(res, req.method === 'POST' ? route : null, entry, o)
  }
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) return res.destroy()
      sendAwsError(res, 500, 'InternalServerException', String(err))
    })
  })
  const host = o.host ?? '127.0.0.1'
  await new Promise<void>((r) => server.listen(o.port ?? 0, host, r))
  return {
    url: `http://${host}:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
