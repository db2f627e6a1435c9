import { createHmac } from 'node:crypto'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP } from 'node:net'
import { defineChannel, type DeliveryOutcome, type OutgoingNotification } from '@berth/core'
import { VERSION } from '../version.js'
import type { LookupFunction } from 'node:net'
import {
  BlockedAddressError,
  checkedLookupWith,
  hostOf,
  isPrivateAddress,
  publicAddresses,
  resolveAll,
  type Resolve,
} from './address-policy.js'

export interface WebhookChannelOptions {
  /** Let webhooks reach private, loopback and link-local addresses (local development, tests). */
  allowPrivate?: boolean
  /** Per attempt, connecting to the last byte of the answer (default 10 s). */
  timeoutMs?: number
  /** How host names resolve (default: the system resolver). Tests answer from a table. */
  resolve?: Resolve
}

/** Network errors worth another attempt (the receiver may be back soon). */
const TRANSIENT = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
  'UND_ERR_SOCKET',
])

/**
 * The signature header value: `sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`.
 *
 * @example
 * ```ts
 * signature('s3cret', 1767225600, '{"event":"task.completed"}') // 'sha256=9c1f…'
 * ```
 */
export function signature(secret: string, timestamp: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`, 'utf8').digest('hex')}`
}

/**
 * The Standard Webhooks `webhook-signature` value: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`.
 * The key is the secret's UTF-8 bytes, or for a secret written `whsec_<base64>` those
 * base64 bytes, as the Standard Webhooks libraries take it (pass them `whsec_` plus the
 * base64 of your secret).
 *
 * @example
 * ```ts
 * standardSignature('s3cret', 'ntf_1', 1767225600, '{"event":"task.completed"}') // 'v1,K5oZ…'
 * ```
 */
export function standardSignature(secret: string, id: string, timestamp: number, body: string): string {
  const key = secret.startsWith('whsec_')
    ? Buffer.from(secret.slice('whsec_'.length), 'base64')
    : Buffer.from(secret, 'utf8')
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`, 'utf8').digest('base64')}`
}

/** A `lookup` over `resolve` that checks nothing (private destinations allowed). */
function plainLookup(resolve: Resolve): LookupFunction {
  return (host, options, callback) => {
    resolve(host).then(
      (all) => {
        const wanted =
          options.family === 4 || options.family === 6 ? all.filter((a) => a.family === options.family) : all
        if (wanted.length === 0)
          callback(Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' }), '', 4)
        else if (options.all) (callback as unknown as (err: null, a: typeof wanted) => void)(null, wanted)
        else callback(null, wanted[0]!.address, wanted[0]!.family)
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 4),
    )
  }
}

/** POST once; resolves the answer's status, or rejects with the network error. */
function post(
  url: URL,
  headers: Record<string, string>,
  body: string,
  opts: { lookup: LookupFunction | undefined; timeoutMs: number },
): Promise<number> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest
    const req = send(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      // A fresh connection per attempt, resolved (and checked) by us.
      agent: false,
      // Resolved once, every address checked, and the connection made to a checked one:
      // a DNS answer that changes between check and connect (rebinding) cannot get through.
      ...(opts.lookup && { lookup: opts.lookup }),
      signal: AbortSignal.timeout(opts.timeoutMs),
    })
    req.on('response', (res: IncomingMessage) => {
      // The answer's body is not kept: drain a little, then hang up.
      let read = 0
      res.on('data', (chunk: Buffer) => {
        read += chunk.length
        if (read > 64 * 1024) res.destroy()
      })
      res.on('end', () => resolve(res.statusCode ?? 0))
      res.on('close', () => resolve(res.statusCode ?? 0))
      res.on('error', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end(body)
  })
}

function failure(err: unknown): DeliveryOutcome {
  const e = err as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException }
  if (err instanceof BlockedAddressError || e.cause instanceof BlockedAddressError) {
    return { ok: false, status: null, error: (e.cause ?? e).message, retryable: false }
  }
  if (e.name === 'AbortError' || e.name === 'TimeoutError')
    return { ok: false, status: null, error: 'timed out waiting for the receiver', retryable: true }
  const code = e.code ?? e.cause?.code
  return {
    ok: false,
    status: null,
    error: `${code ?? 'network error'}: ${e.message}`.slice(0, 300),
    retryable: code !== undefined && TRANSIENT.has(code),
  }
}

/**
 * Webhook deliveries per API.md "Notifications": `POST url` with the JSON payload and
 * `X-Berth-Event`, `X-Berth-Timestamp`, `X-Berth-Delivery` (the same for every attempt of
 * one notification) and, with a `secret`, `X-Berth-Signature`. 2xx is delivered; 5xx, 408,
 * 429, timeouts and connection errors are worth a retry; redirects are not followed.
 * Private, loopback and link-local destinations are refused when the config is saved and
 * again at every attempt, against the very addresses the connection uses.
 *
 * @example
 * ```ts
 * const webhook = webhookChannel({ allowPrivate: false, timeoutMs: 10_000 })
 * await webhook.deliver({ url: 'https://example.com/hook', secret: 's3cret' }, notification)
 * ```
 */
export const webhookChannel = defineChannel((opts: WebhookChannelOptions) => {
  const allowPrivate = opts.allowPrivate ?? false
  const timeoutMs = opts.timeoutMs ?? 10_000
  const resolve = opts.resolve ?? resolveAll
  const lookup = allowPrivate ? (opts.resolve ? plainLookup(opts.resolve) : undefined) : checkedLookupWith(resolve)
  return {
    // A host that resolves to a private address now is refused at once. One that does not
    // resolve (yet) is accepted: every delivery resolves and checks again.
    async check(config) {
      if (allowPrivate || typeof config.url !== 'string') return []
      try {
        await publicAddresses(hostOf(new URL(config.url)), resolve)
        return []
      } catch (err) {
        if (err instanceof BlockedAddressError)
          return [{ location: 'body' as const, path: 'config.url', message: err.message }]
        return []
      }
    },

    async deliver(config, n: OutgoingNotification): Promise<DeliveryOutcome> {
      let url: URL
      try {
        url = new URL(String(config.url))
      } catch {
        return { ok: false, status: null, error: 'the integration has no valid url', retryable: false }
      }
      const host = hostOf(url)
      // Literal addresses never reach `lookup`: check them here.
      if (!allowPrivate && isIP(host) && isPrivateAddress(host)) return failure(new BlockedAddressError(host, host))
      const headers: Record<string, string> = {
        'content-type': 'application/json; charset=utf-8',
        'user-agent': `Berth-Webhooks/${VERSION}`,
        'x-berth-event': n.event,
        'x-berth-timestamp': String(n.timestamp),
        'x-berth-delivery': n.notification_id,
        // Standard Webhooks (standardwebhooks.com): receivers verify with off-the-shelf libraries.
        'webhook-id': n.notification_id,
        'webhook-timestamp': String(n.timestamp),
      }
      if (typeof config.secret === 'string' && config.secret) {
        headers['x-berth-signature'] = signature(config.secret, n.timestamp, n.body)
        headers['webhook-signature'] = standardSignature(config.secret, n.notification_id, n.timestamp, n.body)
      }
      try {
        const status = await post(url, headers, n.body, { lookup, timeoutMs })
        if (status >= 200 && status < 300) return { ok: true, status }
        if (status >= 300 && status < 400)
          return {
            ok: false,
            status,
            error: `the receiver answered ${status}; redirects are not followed`,
            retryable: false,
          }
        return {
          ok: false,
          status,
          error: `the receiver answered ${status}`,
          retryable: status >= 500 || status === 408 || status === 429,
        }
      } catch (err) {
        return failure(err)
      }
    },
  }
})
