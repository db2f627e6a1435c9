import {
  ProviderError,
  defineChannel,
  isProviderError,
  type Channel,
  type Clock,
  type ConnectProvider,
  type DeliveryOutcome,
  type OAuthClient,
  type OutgoingNotification,
} from '@berth/core'
import { createFetchOAuthClient } from '../oauth/fetch-client.js'
import { VERSION } from '../version.js'
import { redact } from './redact.js'
import { subjectOf } from './email.js'

/**
 * The chat-workspace provider's app (`createBerth({ chatProvider })`), Slack-shaped: OAuth v2
 * with token rotation, the Web API (`chat.postMessage`, `auth.test`, `auth.revoke`) and
 * signed Events API requests. Endpoints default to slack.com; point them at a fake in tests.
 */
export interface ChatProviderConfig {
  clientId: string
  clientSecret: string
  /** The app's signing secret: `POST /api/chatprovider/events` verifies requests with it (without it, every event is refused). */
  signingSecret?: string
  /** Default `https://slack.com/oauth/v2/authorize`. */
  authorizeUrl?: string
  /** Default `https://slack.com/api/oauth.v2.access`. */
  tokenUrl?: string
  /** The Web API base, default `https://slack.com/api` (methods are `<apiBaseUrl>/<method>`). */
  apiBaseUrl?: string
  /** Bot scopes to request (default `chat:write`, `app_mentions:read`). */
  scopes?: string[]
  /** Send a PKCE S256 challenge (default off). */
  pkce?: boolean
  /** The redirect URI registered with the app; default: `/api/chatprovider/callback` on the authorize request's origin. */
  redirectUri?: string
}

/** Provider errors that mean "the grant's token is no good". */
const AUTH_ERRORS = new Set(['invalid_auth', 'not_authed', 'token_revoked', 'token_expired', 'account_inactive'])
/** Provider errors worth another attempt. */
const TRANSIENT_ERRORS = new Set([
  'ratelimited',
  'internal_error',
  'fatal_error',
  'service_unavailable',
  'request_timeout',
])
/** Token-endpoint errors that mean "authorize again" (the generic client does not know this provider's names). */
const GRANT_ERRORS = new Set([
  'invalid_code',
  'code_already_used',
  'invalid_refresh_token',
  'token_revoked',
  'token_expired',
  'invalid_code_verifier',
])

interface ApiAnswer {
  status: number
  body: Record<string, unknown> | null
}

/** One Web API call: `POST <base>/<method>` with a JSON body and the bearer token. Throws on network errors. */
async function callApi(
  doFetch: typeof fetch,
  base: string,
  method: string,
  token: string,
  args: Record<string, unknown>,
  timeoutMs: number,
): Promise<ApiAnswer> {
  const res = await doFetch(`${base}/${method}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json; charset=utf-8',
      'user-agent': `Berth/${VERSION}`,
    },
    body: JSON.stringify(args),
    redirect: 'manual',
    signal: AbortSignal.timeout(timeoutMs),
  })
  const body = (await res.json().catch(() => null)) as unknown
  return {
    status: res.status,
    body: body && typeof body === 'object' && !Array.isArray(body) ? (body as Record<string, unknown>) : null,
  }
}

const escapeMrkdwn = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

/**
 * A notification as a chat message (mrkdwn, escaped): the summary in bold, the error, the
 * result text quoted (up to 3,000 characters).
 *
 * @example
 * ```ts
 * chatText(notification) // '*Berth: task task_… completed*\n>Done.'
 * ```
 */
export function chatText(n: OutgoingNotification): string {
  const p = n.payload as {
    task?: { result?: { text?: string } | null; error?: { error: string } | null }
    run?: { error?: { error: string } | null }
  }
  const lines = [`*${escapeMrkdwn(subjectOf(n))}*`]
  const error = (p.task ?? p.run)?.error?.error
  if (error) lines.push(`Error: ${escapeMrkdwn(error.slice(0, 1000))}`)
  const text = p.task?.result?.text
  if (text) lines.push(`>${escapeMrkdwn(text.slice(0, 3000)).replace(/\n/g, '\n>')}`)
  if (n.event === 'integration.test') lines.push('This is a test notification: the integration works.')
  return lines.join('\n')
}

/**
 * Chat deliveries: `chat.postMessage` to the integration's `channel` with its (fresh)
 * bearer token. The provider answers HTTP 200 with `{ ok: false, error }` for refusals:
 * auth errors (`invalid_auth`, `token_revoked`, `token_expired`, ...) are `unauthorized`
 * (core refreshes or marks the integration for reconnection), `ratelimited` / HTTP 429 /
 * 5xx are retried, anything else (`channel_not_found`, `not_in_channel`, ...) fails.
 *
 * @example
 * ```ts
 * const chat = chatChannel({ apiBaseUrl: 'https://slack.com/api' })
 * await chat.deliver({ channel: '#alerts', access_token: 'xoxb-…' }, notification)
 * ```
 */
export const chatChannel = defineChannel(
  (o: { apiBaseUrl: string; timeoutMs?: number; fetch?: typeof fetch }): Channel => {
    const doFetch = o.fetch ?? fetch
    const timeoutMs = o.timeoutMs ?? 10_000
    return {
      async deliver(config, n): Promise<DeliveryOutcome> {
        const token = typeof config.access_token === 'string' ? config.access_token : ''
        const channel = typeof config.channel === 'string' ? config.channel : ''
        if (!channel)
          return {
            ok: false,
            status: null,
            error: 'no channel is set: PATCH the integration with config.channel (a channel id or #name)',
            retryable: false,
          }
        let answer: ApiAnswer
        try {
          answer = await callApi(
            doFetch,
            o.apiBaseUrl,
            'chat.postMessage',
            token,
            { channel, text: chatText(n), unfurl_links: false, unfurl_media: false },
            timeoutMs,
          )
        } catch (err) {
          const e = err as Error & { cause?: { code?: string } }
          const why = e.name === 'TimeoutError' || e.name === 'AbortError' ? 'timed out' : (e.cause?.code ?? e.message)
          return {
            ok: false,
            status: null,
            error: `could not reach the chat provider: ${why}`.slice(0, 300),
            retryable: true,
          }
        }
        const { status, body } = answer
        if (body?.ok === true) return { ok: true, status }
        const code = typeof body?.error === 'string' ? redact(body.error, [token]).slice(0, 100) : null
        if (code === null)
          return {
            ok: false,
            status,
            error: `the chat provider answered ${status}`,
            retryable: status >= 500 || status === 429,
          }
        const needed = typeof body?.needed === 'string' ? ` (needs ${body.needed.slice(0, 100)})` : ''
        return {
          ok: false,
          status,
          error: `the chat provider refused the message: ${code}${needed}`,
          retryable: status === 429 || status >= 500 || TRANSIENT_ERRORS.has(code),
          ...(AUTH_ERRORS.has(code) && { unauthorized: true }),
        }
      },
    }
  },
)

/** The generic client's errors, with this provider's grant error names classified as `invalid_grant`. */
async function classified<T>(p: Promise<T>): Promise<T> {
  try {
    return await p
  } catch (err) {
    if (isProviderError(err, 'oauth') && err.kind === 'client' && err.code && GRANT_ERRORS.has(err.code))
      throw new ProviderError('oauth', 'invalid_grant', err.message, { code: err.code, status: err.status })
    throw err
  }
}

/**
 * The chat provider as core's `ConnectProvider` (OAuth v2 over the generic client, the
 * workspace from `auth.test`, revocation with `auth.revoke`) and its delivery channel.
 *
 * @example
 * ```ts
 * const chat = createChatProvider({ clientId, clientSecret, signingSecret })
 * createServices({ store, cipher, connectProviders: { chatprovider: chat.connect }, chatSigningSecret: chat.signingSecret })
 * ```
 */
export function createChatProvider(
  c: ChatProviderConfig,
  opts: { clock?: Clock; fetch?: typeof fetch; timeoutMs?: number } = {},
) {
  if (!c.clientId || !c.clientSecret) throw new Error('chatProvider: clientId and clientSecret are required')
  const doFetch = opts.fetch ?? fetch
  const timeoutMs = opts.timeoutMs ?? 10_000
  const apiBaseUrl = (c.apiBaseUrl ?? 'https://slack.com/api').replace(/\/+$/, '')
  const scopes = c.scopes ?? ['chat:write', 'app_mentions:read']
  const base = createFetchOAuthClient({
    clientId: c.clientId,
    clientSecret: c.clientSecret,
    authorizeUrl: c.authorizeUrl ?? 'https://slack.com/oauth/v2/authorize',
    tokenUrl: c.tokenUrl ?? 'https://slack.com/api/oauth.v2.access',
    revocation: null,
    scopes,
    clientAuth: 'body',
    pkce: c.pkce ?? false,
    fetch: doFetch,
    timeoutMs,
    clock: opts.clock,
  })

  /** A Web API call that must succeed: its body, or a `ProviderError` of `oauth`. */
  async function must(method: string, token: string): Promise<Record<string, unknown>> {
    let answer: ApiAnswer
    try {
      answer = await callApi(doFetch, apiBaseUrl, method, token, {}, timeoutMs)
    } catch (err) {
      throw new ProviderError(
        'oauth',
        'unavailable',
        `could not reach the chat provider: ${err instanceof Error ? err.message : String(err)}`,
      )
    }
    const { status, body } = answer
    if (body?.ok === true) return body
    const code = typeof body?.error === 'string' ? body.error.slice(0, 100) : undefined
    if (code && AUTH_ERRORS.has(code))
      throw new ProviderError('oauth', 'unauthorized', `${method} refused the token (${code})`, { code, status })
    throw new ProviderError(
      'oauth',
      status >= 500 || !code ? 'unavailable' : 'client',
      `${method} answered ${code ?? status}`,
      { code, status },
    )
  }

  const oauth: OAuthClient = {
    pkce: base.pkce,
    authorizeUrl(req) {
      // This provider takes scopes comma-separated.
      const url = new URL(base.authorizeUrl(req))
      if (scopes.length) url.searchParams.set('scope', scopes.join(','))
      return url.href
    },
    exchangeCode: (req) => classified(base.exchangeCode(req)),
    refresh: (token) => classified(base.refresh(token)),
    async revoke(tokens) {
      try {
        await must('auth.revoke', tokens.access_token)
      } catch (err) {
        // Already revoked or lapsed: nothing left to revoke.
        if (isProviderError(err, 'oauth') && err.kind === 'unauthorized') return
        throw err
      }
    },
  }

  const connect: ConnectProvider = {
    oauth,
    async account(token) {
      const b = await must('auth.test', token)
      const str = (x: unknown) => (typeof x === 'string' ? x : '')
      return { team_id: str(b.team_id), team_name: str(b.team), bot_user_id: str(b.user_id) }
    },
    redirectUri: c.redirectUri,
  }
  return { connect, channel: chatChannel({ apiBaseUrl, timeoutMs, fetch: doFetch }), signingSecret: c.signingSecret }
}
