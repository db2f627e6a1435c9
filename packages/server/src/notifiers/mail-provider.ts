import {
  ProviderError,
  defineChannel,
  type Channel,
  type Clock,
  type ConnectProvider,
  type DeliveryOutcome,
  type OAuthClient,
} from '@berth/core'
import { createFetchOAuthClient } from '../oauth/fetch-client.js'
import { VERSION } from '../version.js'
import { redact } from './redact.js'
import { subjectOf, textOf } from './email.js'
import { mailMessage } from './mail-message.js'

/**
 * The mail provider's OAuth client (`createBerth({ mailProvider })`), Gmail-shaped: Google
 * OAuth 2 (offline access, PKCE), OpenID userinfo for the mailbox, and the Gmail send API.
 * Endpoints default to Google's; point them at a fake in tests.
 */
export interface MailProviderConfig {
  clientId: string
  clientSecret: string
  /** Default `https://accounts.google.com/o/oauth2/v2/auth`. */
  authorizeUrl?: string
  /** Default `https://oauth2.googleapis.com/token`. */
  tokenUrl?: string
  /** The Gmail API base, default `https://gmail.googleapis.com` (mail goes to `<apiBaseUrl>/gmail/v1/users/me/messages/send`). */
  apiBaseUrl?: string
  /** Where the mailbox address is read, default `https://openidconnect.googleapis.com/v1/userinfo`. */
  userinfoUrl?: string
  /** Where grants are revoked on disconnect, default `https://oauth2.googleapis.com/revoke`; null: nowhere. */
  revokeUrl?: string | null
  /** Default `openid`, `email`, `https://www.googleapis.com/auth/gmail.send`. */
  scopes?: string[]
  /** Send a PKCE S256 challenge (default on). */
  pkce?: boolean
  /** The redirect URI registered with the client; default: `/api/mailprovider/callback` on the authorize request's origin. */
  redirectUri?: string
}

interface Answer {
  status: number
  body: Record<string, unknown> | null
}

async function call(doFetch: typeof fetch, url: string, init: RequestInit, timeoutMs: number): Promise<Answer> {
  const res = await doFetch(url, { ...init, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) })
  const body = (await res.json().catch(() => null)) as unknown
  return {
    status: res.status,
    body: body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : null,
  }
}

/** Google's `{ error: { code, message, status } }`, as one line. */
function apiError(a: Answer): string {
  const e = a.body?.error as { message?: unknown; status?: unknown } | string | undefined
  if (typeof e === 'string') return e.slice(0, 200)
  const status = typeof e?.status === 'string' ? `${e.status}: ` : ''
  return `${status}${typeof e?.message === 'string' ? e.message.slice(0, 300) : `HTTP ${a.status}`}`
}

/**
 * Mail deliveries through the provider's send API with the integration's grant: one
 * RFC 2822 message per notification from the connected mailbox to `recipients`,
 * `POST <apiBaseUrl>/gmail/v1/users/me/messages/send` with `{ raw: base64url(message) }`.
 * 401 is `unauthorized` (core refreshes the token, or marks the integration for
 * reconnection); 429 and 5xx are retried; other refusals (403 missing scope, 400) fail.
 *
 * @example
 * ```ts
 * const mail = mailChannel({ apiBaseUrl: 'https://gmail.googleapis.com' })
 * await mail.deliver({ email: 'ada@example.com', recipients: ['ops@example.com'], access_token: 'ya29…' }, notification)
 * ```
 */
export const mailChannel = defineChannel(
  (o: { apiBaseUrl: string; timeoutMs?: number; fetch?: typeof fetch }): Channel => {
    const doFetch = o.fetch ?? fetch
    const timeoutMs = o.timeoutMs ?? 10_000
    return {
      async deliver(config, n): Promise<DeliveryOutcome> {
        const from = typeof config.email === 'string' ? config.email : ''
        const to = Array.isArray(config.recipients)
          ? config.recipients.filter((r): r is string => typeof r === 'string')
          : []
        if (!from)
          return { ok: false, status: null, error: 'the integration has no connected mailbox', retryable: false }
        if (to.length === 0)
          return { ok: false, status: null, error: 'the integration has no recipients', retryable: false }
        const message = await mailMessage({
          from,
          to,
          subject: subjectOf(n),
          text: textOf(n),
          date: new Date(n.timestamp * 1000),
          messageId: `${n.notification_id}@berth`,
          headers: { 'X-Berth-Event': n.event, 'X-Berth-Delivery': n.notification_id },
        })
        let answer: Answer
        try {
          answer = await call(
            doFetch,
            `${o.apiBaseUrl}/gmail/v1/users/me/messages/send`,
            {
              method: 'POST',
              headers: {
                authorization: `Bearer ${String(config.access_token ?? '')}`,
                'content-type': 'application/json; charset=utf-8',
                'user-agent': `Berth/${VERSION}`,
              },
              body: JSON.stringify({ raw: message.toString('base64url') }),
            },
            timeoutMs,
          )
        } catch (err) {
          const e = err as Error & { cause?: { code?: string } }
          const why = e.name === 'TimeoutError' || e.name === 'AbortError' ? 'timed out' : (e.cause?.code ?? e.message)
          return {
            ok: false,
            status: null,
            error: `could not reach the mail provider: ${why}`.slice(0, 300),
            retryable: true,
          }
        }
        const { status } = answer
        if (status >= 200 && status < 300) return { ok: true, status }
        return {
          ok: false,
          status,
          error: `the mail provider refused the message (${status} ${redact(apiError(answer), [String(config.access_token ?? '')])})`,
          retryable: status === 429 || status >= 500,
          ...(status === 401 && { unauthorized: true }),
        }
      },
    }
  },
)

/**
 * The mail provider as core's `ConnectProvider` (Google OAuth with offline access over the
 * generic client, the mailbox from userinfo, revocation) and its delivery channel.
 *
 * @example
 * ```ts
 * const mail = createMailProvider({ clientId, clientSecret })
 * createServices({ store, cipher, connectProviders: { mailprovider: mail.connect } })
 * ```
 */
export function createMailProvider(
  c: MailProviderConfig,
  opts: { clock?: Clock; fetch?: typeof fetch; timeoutMs?: number } = {},
) {
  if (!c.clientId || !c.clientSecret) throw new Error('mailProvider: clientId and clientSecret are required')
  const doFetch = opts.fetch ?? fetch
  const timeoutMs = opts.timeoutMs ?? 10_000
  const apiBaseUrl = (c.apiBaseUrl ?? 'https://gmail.googleapis.com').replace(/\/+$/, '')
  const userinfoUrl = c.userinfoUrl ?? 'https://openidconnect.googleapis.com/v1/userinfo'
  const revokeUrl = c.revokeUrl === undefined ? 'https://oauth2.googleapis.com/revoke' : c.revokeUrl
  const base = createFetchOAuthClient({
    clientId: c.clientId,
    clientSecret: c.clientSecret,
    authorizeUrl: c.authorizeUrl ?? 'https://accounts.google.com/o/oauth2/v2/auth',
    tokenUrl: c.tokenUrl ?? 'https://oauth2.googleapis.com/token',
    revocation: null,
    scopes: c.scopes ?? ['openid', 'email', 'https://www.googleapis.com/auth/gmail.send'],
    clientAuth: 'body',
    pkce: c.pkce ?? true,
    fetch: doFetch,
    timeoutMs,
    clock: opts.clock,
  })

  const unreachable = (what: string, err: unknown) =>
    new ProviderError(
      'oauth',
      'unavailable',
      `could not reach the mail provider's ${what}: ${err instanceof Error ? err.message : String(err)}`,
    )

  const oauth: OAuthClient = {
    pkce: base.pkce,
    authorizeUrl(req) {
      // Offline access: the code exchange must hand out a refresh token, and does so
      // again on a reconnect only when consent is asked for again.
      const url = new URL(base.authorizeUrl(req))
      url.searchParams.set('access_type', 'offline')
      url.searchParams.set('prompt', 'consent')
      return url.href
    },
    exchangeCode: (req) => base.exchangeCode(req),
    refresh: (token) => base.refresh(token),
    async revoke(tokens) {
      if (!revokeUrl) return
      // Revoking the refresh token ends the whole grant (its access tokens too).
      const form = new URLSearchParams({ token: tokens.refresh_token ?? tokens.access_token })
      let answer: Answer
      try {
        answer = await call(
          doFetch,
          revokeUrl,
          { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() },
          timeoutMs,
        )
      } catch (err) {
        throw unreachable('revocation endpoint', err)
      }
      // 400 invalid_token: already revoked or expired.
      if (answer.status === 200 || (answer.status === 400 && answer.body?.error === 'invalid_token')) return
      throw new ProviderError(
        'oauth',
        answer.status >= 500 ? 'unavailable' : 'client',
        `token revocation answered ${answer.status}`,
        { status: answer.status },
      )
    },
  }

  const connect: ConnectProvider = {
    oauth,
    async account(token) {
      let a: Answer
      try {
        a = await call(
          doFetch,
          userinfoUrl,
          { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } },
          timeoutMs,
        )
      } catch (err) {
        throw unreachable('userinfo endpoint', err)
      }
      if (a.status === 401 || a.status === 403)
        throw new ProviderError('oauth', 'unauthorized', `userinfo refused the token (${apiError(a)})`, {
          status: a.status,
        })
      if (a.status !== 200 || !a.body)
        throw new ProviderError('oauth', 'unavailable', `userinfo answered ${a.status}`, { status: a.status })
      const sub = a.body.sub
      const email = a.body.email
      return {
        account_id: typeof sub === 'string' ? sub : typeof sub === 'number' ? String(sub) : '',
        email: typeof email === 'string' ? email : '',
      }
    },
    redirectUri: c.redirectUri,
  }
  return { connect, channel: mailChannel({ apiBaseUrl, timeoutMs, fetch: doFetch }) }
}
