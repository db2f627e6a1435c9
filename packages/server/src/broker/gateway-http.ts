/**
 * The HTTP plumbing of the model gateway: Anthropic-shaped error replies, the request body
 * read under a limit, and which headers cross the gateway in each direction.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { answerHeaders, HOP_BY_HOP } from '../upstream-answer.js'

/** The error `type`s the gateway answers with itself, as Anthropic names them. */
export type GatewayErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'api_error'

/**
 * Answer with an error in Anthropic's shape (`{"type":"error","error":{type,message}}`),
 * which Claude Code shows to its user as it would the provider's own.
 *
 * @example
 * ```ts
 * sendError(res, 401, 'authentication_error', 'Berth model gateway: unknown or expired token')
 * ```
 */
export function sendError(res: ServerResponse, status: number, type: GatewayErrorType, message: string): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = JSON.stringify({ type: 'error', error: { type, message } })
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

/** A body over the gateway's limit: the caller answers 413. */
export class BodyTooLarge extends Error {}

/**
 * The request body, whole, or {@link BodyTooLarge} once it passes `limit` bytes (a declared
 * `content-length` over the limit is refused before anything is read).
 *
 * @example
 * ```ts
 * const body = await readBody(req, 32 << 20)
 * ```
 */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  if (Number(req.headers['content-length'] ?? 0) > limit) throw new BodyTooLarge()
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).byteLength
    if (size > limit) throw new BodyTooLarge()
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
}

/**
 * Headers the gateway never passes to the provider: the capability token (`x-api-key`,
 * `authorization`), `host` and the length (fetch sets both for the upstream), and
 * `accept-encoding`, so fetch negotiates compression with the provider itself and hands
 * the gateway plain bytes to meter.
 */
const NOT_UPSTREAM = new Set(['x-api-key', 'authorization', 'host', 'content-length', 'accept-encoding', 'cookie'])

/**
 * Headers the gateway never passes back to the client: fetch has already decoded the
 * body, so its encoding and length no longer describe the bytes sent; cookies the
 * provider's edge sets belong to the gateway's connection, not to the sandbox.
 */
const NOT_DOWNSTREAM = new Set(['content-encoding', 'content-length', 'set-cookie'])

function connectionTokens(value: string | string[] | null | undefined): Set<string> {
  const text = Array.isArray(value) ? value.join(',') : (value ?? '')
  return new Set(
    text
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  )
}

/**
 * The client's headers that may go upstream: minus the token, hop-by-hop headers (and
 * those its `Connection` header names) and the ones fetch sets itself. The provider adds
 * its own authentication.
 *
 * @example
 * ```ts
 * const headers = forwardedHeaders(req.headers)
 * headers.set('authorization', `Bearer ${accessToken}`)
 * ```
 */
export function forwardedHeaders(incoming: IncomingHttpHeaders): Headers {
  const named = connectionTokens(incoming.connection)
  const out = new Headers()
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.has(name) || NOT_UPSTREAM.has(name) || named.has(name)) continue
    for (const v of Array.isArray(value) ? value : [value]) out.append(name, v)
  }
  return out
}

/**
 * The headers to send to the Anthropic API: {@link forwardedHeaders} plus the real key.
 *
 * @example
 * ```ts
 * await fetch(url, { method: 'POST', headers: upstreamHeaders(req.headers, grant.upstream.api_key), body })
 * ```
 */
export function upstreamHeaders(incoming: IncomingHttpHeaders, apiKey: string): Headers {
  const out = forwardedHeaders(incoming)
  out.set('x-api-key', apiKey)
  return out
}

/**
 * The provider's response headers as node:http writes them, through the one copy every proxy
 * makes ({@link answerHeaders}: hop-by-hop headers and those the `Connection` header names
 * dropped, and any name or value Node would refuse), minus those that described the encoded body.
 *
 * @example
 * ```ts
 * writeAnswerHead(res, upstream.status, downstreamHeaders(upstream.headers))
 * ```
 */
export function downstreamHeaders(headers: Headers): string[] {
  const raw: string[] = []
  headers.forEach((value, name) => {
    raw.push(name, value)
  })
  return answerHeaders(raw, { drop: NOT_DOWNSTREAM })
}

/**
 * The capability token a request carries: `x-api-key` (what Claude Code sends with
 * `ANTHROPIC_API_KEY`), else `Authorization: Bearer` (with `ANTHROPIC_AUTH_TOKEN`).
 *
 * @example
 * ```ts
 * tokenOf({ authorization: 'Bearer btk_123' }) // 'btk_123'
 * ```
 */
export function tokenOf(headers: IncomingHttpHeaders): string | undefined {
  const key = headers['x-api-key']
  if (typeof key === 'string' && key) return key
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(headers.authorization ?? '')
  return bearer?.[1]
}
