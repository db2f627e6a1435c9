import { createHmac } from 'node:crypto'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { isIP } from 'node:net'
import type { DeliveryOutcome, OutgoingNotification } from '@berth/core'
import { VERSION } from '../version.js'
import { BlockedAddressError, checkedLookup, hostOf, isPrivateAddress, publicAddresses } from './address-policy.js'
import { defineChannel } from './channel.js'

export interface WebhookChannelOptions {
  /** Let webhooks reach private, loopback and link-local addresses (local development, tests). */
  allowPrivate?: boolean
  /** Per attempt, connecting to the last byte of the answer (default 10 s). */
  timeoutMs?: number
}

/** Network errors worth another attempt (the receiver may be back soon). */
const TRANSIENT = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND', 'UND_ERR_SOCKET'])

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

/** POST once; resolves the answer's status, or rejects with the network error. */
function post(url: URL, headers: Record<string, string>, body: string, opts: { allowPrivate: boolean; timeoutMs: number }): Promise<number> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest
    const req = send(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      // A fresh connection per attempt, resolved (and checked) by us.
      agent: false,
      ...(!opts.allowPrivate && { lookup: checkedLookup }),
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
  if (e.name === 'AbortError' || e.name === 'TimeoutError') return { ok: false, status: null, error: 'timed out waiting for the receiver', retryable: true }
  const code = e.code ?? e.cause?.code
  return { ok: false, status: null, error: `${code ?? 'network error'}: ${e.message}`.slice(0, 300), retryable: code !== undefined && TRANSIENT.has(code) }
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
  return {
    async check(config) {
      if (allowPrivate || typeof config.url !== 'string') return []
      try {
        await publicAddresses(hostOf(new URL(config.url)))
        return []
      } catch (err) {
        const message = err instanceof BlockedAddressError ? err.message : `the host does not resolve (${(err as NodeJS.ErrnoException).code ?? 'lookup failed'})`
        return [{ location: 'body' as const, path: 'config.url', message }]
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
      }
      if (typeof config.secret === 'string' && config.secret) headers['x-berth-signature'] = signature(config.secret, n.timestamp, n.body)
      try {
        const status = await post(url, headers, n.body, { allowPrivate, timeoutMs })
        if (status >= 200 && status < 300) return { ok: true, status }
        if (status >= 300 && status < 400) return { ok: false, status, error: `the receiver answered ${status}; redirects are not followed`, retryable: false }
        return { ok: false, status, error: `the receiver answered ${status}`, retryable: status >= 500 || status === 408 || status === 429 }
      } catch (err) {
        return failure(err)
      }
    },
  }
})
