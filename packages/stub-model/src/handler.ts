import type { IncomingMessage, ServerResponse } from 'node:http'
import { DirectiveError } from './directives.js'
import { API_ERRORS, errorBody } from './errors.js'
import { answer, type Answer, type MessagesRequest } from './respond.js'
import { encodeEvent, messageBody, streamEvents } from './sse.js'

/** One request the offline model received, as recorded for tests. */
export interface RecordedRequest {
  method: string
  /** Path with query string, e.g. `/v1/messages?beta=true`. */
  url: string
  headers: Record<string, string | string[] | undefined>
  /** The parsed JSON body (undefined when there was none or it was not JSON). */
  body: unknown
}

/** One model call the offline model answered: the model it answered as and the usage it reported. */
export interface RecordedAnswer {
  model: string
  usage: { input_tokens: number; output_tokens: number }
  /** The answer's message id (`msg_…`). */
  id: string
}

/** Options of {@link createOfflineModel}. */
export interface OfflineModelOptions {
  /** When set, requests must carry it (`x-api-key` or `Authorization: Bearer`), else 401. */
  apiKey?: string
  /** Called with every request, before it is answered. */
  onRequest?: (req: RecordedRequest) => void
  /** Called with every message it answers (not errors), as it starts answering, streamed or not. */
  onAnswer?: (answer: RecordedAnswer) => void
}

/** A node:http request handler. */
export type RequestHandler = (req: IncomingMessage, res: ServerResponse) => void

const MODELS = ['claude-sonnet-4-5', 'claude-opus-4-1', 'claude-haiku-4-5']
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json',
    'request-id': requestId(),
    'content-length': Buffer.byteLength(text),
  })
  res.end(text)
}

let seq = 0
function requestId(): string {
  return `req_offline_${(++seq).toString(36).padStart(8, '0')}`
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

function authorized(req: IncomingMessage, key: string | undefined): boolean {
  if (!key) return true
  const bearer = req.headers.authorization?.replace(/^Bearer\s+/i, '')
  return req.headers['x-api-key'] === key || bearer === key
}

async function messages(
  body: MessagesRequest,
  res: ServerResponse,
  onAnswer: OfflineModelOptions['onAnswer'],
): Promise<void> {
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return sendJson(res, 400, errorBody('invalid_request_error', 'messages: at least one message is required'))
  }
  let a: Answer
  try {
    a = answer(body)
  } catch (err) {
    if (err instanceof DirectiveError) return sendJson(res, 400, errorBody('invalid_request_error', err.message))
    throw err
  }
  if (a.kind === 'error') {
    const { type, status } = API_ERRORS[a.error]
    return sendJson(res, status, errorBody(type, a.message))
  }
  onAnswer?.({ model: a.model, usage: { ...a.usage }, id: a.id })
  if (!body.stream) return sendJson(res, 200, messageBody(a))
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'request-id': requestId(),
  })
  for (const e of streamEvents(a)) {
    if (res.destroyed) return
    if (a.slowMs && e.event === 'content_block_delta') await sleep(a.slowMs)
    res.write(encodeEvent(e))
  }
  res.end()
}

/**
 * The offline model: a fake of the Anthropic Messages API for node:http, scripted by
 * `[[berth:...]]` directives in the user prompt (see the testkit README). Serves
 * `POST /v1/messages` (SSE with `stream: true`, JSON otherwise; any query such as
 * `?beta=true`), `POST /v1/messages/count_tokens`, `GET /v1/models[/:id]`; anything else
 * is a 404 in Anthropic's error shape.
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http'
 * createServer(createOfflineModel({ onRequest: (r) => console.log(r.url) })).listen(8787)
 * ```
 */
export function createOfflineModel(opts: OfflineModelOptions = {}): RequestHandler {
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://offline.model')
    const raw = await readBody(req)
    let body: unknown
    let badJson = false
    if (raw) {
      try {
        body = JSON.parse(raw)
      } catch {
        badJson = true
      }
    }
    opts.onRequest?.({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, body })
    if (!authorized(req, opts.apiKey)) return sendJson(res, 401, errorBody('authentication_error', 'invalid x-api-key'))
    if (badJson) return sendJson(res, 400, errorBody('invalid_request_error', 'request body is not valid JSON'))
    const route = `${req.method} ${url.pathname.replace(/\/+$/, '')}`
    if (route === 'POST /v1/messages') return messages((body ?? {}) as MessagesRequest, res, opts.onAnswer)
    if (route === 'POST /v1/messages/count_tokens') {
      const size = JSON.stringify((body as MessagesRequest | undefined)?.messages ?? []).length
      return sendJson(res, 200, { input_tokens: Math.max(1, Math.ceil(size / 4)) })
    }
    if (route === 'GET /v1/models') {
      const data = MODELS.map(model)
      return sendJson(res, 200, { data, has_more: false, first_id: data[0]!.id, last_id: data.at(-1)!.id })
    }
    const one = /^GET \/v1\/models\/([^/]+)$/.exec(route)
    if (one) return sendJson(res, 200, model(decodeURIComponent(one[1]!)))
    return sendJson(res, 404, errorBody('not_found_error', `Not found: ${req.method} ${url.pathname}`))
  }
  return (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) return res.destroy()
      sendJson(
        res,
        500,
        errorBody('api_error', `offline model failed: ${err instanceof Error ? err.message : String(err)}`),
      )
    })
  }
}

function model(id: string) {
  return { type: 'model', id, display_name: `${id} (offline)`, created_at: '2025-01-01T00:00:00Z' }
}
