/** A local fake of a Slack-like chat-workspace provider (OAuth with token rotation, the Web API, signed events), over real HTTP. */
import { createHmac } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { bearerOf, formOf, grantBook, randomHex, readBody, sendJson, type GrantFailure } from './chat-mail-grants.js'
import type {
  FakeChatTeam,
  FakeChatProviderOptions,
  FakeChatRequest,
  FakeChatMessage,
  FakeChatProvider,
} from './chat-provider-types.js'

/**
 * The provider's request signature: `v0=<hex HMAC-SHA256(signing_secret, "v0:<timestamp>:<body>")>`.
 *
 * @example
 * ```ts
 * chatSignature('8f2c…', 1767225600, '{"type":"url_verification"}') // 'v0=5d1e…'
 * ```
 */
export function chatSignature(secret: string, timestamp: number | string, body: string): string {
  return `v0=${createHmac('sha256', secret).update(`v0:${timestamp}:${body}`, 'utf8').digest('hex')}`
}

interface Installer {
  team: FakeChatTeam
  botUserId: string
}

/** `oauth.v2.access` failures, as the provider names them (always HTTP 200 with `ok: false`). */
const TOKEN_ERRORS: Record<GrantFailure, string> = {
  bad_client: 'invalid_client_id',
  bad_code: 'invalid_code',
  bad_redirect: 'bad_redirect_uri',
  bad_pkce: 'invalid_code_verifier',
  bad_refresh: 'invalid_refresh_token',
  unsupported_grant: 'invalid_grant_type',
}

/**
 * A local fake of a Slack-like chat-workspace provider, over real HTTP:
 * - OAuth 2 (`GET /oauth/v2/authorize`, `POST /api/oauth.v2.access`): single-use codes,
 *   redirect URI checked, the `authorization_code` and `refresh_token` grants with token
 *   rotation (expiring bot tokens, rotating refresh tokens) on the given clock;
 * - the Web API (`POST /api/<method>`, bearer token or `token` form field, answers always
 *   HTTP 200 with `{ ok, error? }`): `auth.test`, `auth.revoke`, `chat.postMessage`
 *   (recorded; `channel_not_found`, `not_authed`, `invalid_auth`, `token_expired`,
 *   `token_revoked`, `missing_scope` as the provider answers them);
 * - an events sender signing like the provider (`X-Signature`, `X-Request-Timestamp`).
 *
 * @example
 * ```ts
 * const chat = await startFakeChatProvider({ now: () => clock.now() })
 * const berth = createBerth({ chatProvider: chat.config() })
 * await chat.sendEvent(`${berthUrl}/api/chatprovider/events`, chat.messageEvent('hello'))
 * ```
 */
export async function startFakeChatProvider(opts: FakeChatProviderOptions = {}): Promise<FakeChatProvider> {
  const clientId = opts.clientId ?? `${randomHex(4)}.${randomHex(6)}`
  const clientSecret = opts.clientSecret ?? randomHex(16)
  const signingSecret = opts.signingSecret ?? randomHex(16)
  const team = opts.team ?? { id: 'T0ACME', name: 'Acme' }
  const botUserId = opts.botUserId ?? 'U0BERTHBOT'
  const channels = opts.channels ?? [
    { id: 'C0GENERAL', name: 'general' },
    { id: 'C0ALERTS', name: 'alerts' },
  ]
  const now = opts.now ?? Date.now
  const rotate = opts.rotateTokens ?? true
  const book = grantBook<Installer>({
    clientId,
    clientSecret,
    now,
    // Without rotation a bot token never expires: a lifetime beyond any test.
    accessTtlSeconds: rotate ? (opts.accessTokenTtlSeconds ?? 12 * 3600) : 100 * 365 * 86400,
    pkce: false,
    rotateRefreshTokens: true,
    offline: () => rotate,
    accessToken: (r) => (rotate ? `xoxe.xoxb-1-${r}` : `xoxb-${r}`),
    refreshToken: (r) => `xoxe-1-${r}`,
  })
  const requests: FakeChatRequest[] = []
  const messages: FakeChatMessage[] = []
  let decline = false
  let failures: string[] = []
  let seq = 0

  const tokenBody = (r: {
    accessToken: string
    ttlSeconds: number
    grant: { scopes: string[]; refreshToken: string | null }
  }) => ({
    ok: true,
    app_id: 'A0BERTHAPP',
    authed_user: { id: 'U0INSTALLER' },
    scope: r.grant.scopes.join(','),
    token_type: 'bot',
    access_token: r.accessToken,
    bot_user_id: botUserId,
    team,
    enterprise: null,
    is_enterprise_install: false,
    ...(rotate && { refresh_token: r.grant.refreshToken, expires_in: r.ttlSeconds }),
  })

  async function api(method: string, req: IncomingMessage, res: ServerResponse, rec: FakeChatRequest): Promise<number> {
    const form = formOf(req, await readBody(req))
    const reply = (body: Record<string, unknown>) => {
      if (body.ok === false) rec.error = String(body.error)
      return sendJson(res, 200, body)
    }
    if (method === 'oauth.v2.access') {
      rec.grant_type = form.get('grant_type') ?? 'authorization_code'
      const r = book.token(req, form)
      return reply(r.ok ? tokenBody(r) : { ok: false, error: TOKEN_ERRORS[r.failure] })
    }
    const token = bearerOf(req) ?? form.get('token') ?? undefined
    if (!token) return reply({ ok: false, error: 'not_authed' })
    const check = book.check(token)
    if (!check.ok)
      return reply({
        ok: false,
        error:
          check.reason === 'revoked' ? 'token_revoked' : check.reason === 'expired' ? 'token_expired' : 'invalid_auth',
      })
    const installer = check.grant.user
    switch (method) {
      case 'auth.test':
        return reply({
          ok: true,
          url: `https://${installer.team.name.toLowerCase()}.chat.example/`,
          team: installer.team.name,
          user: 'berth',
          team_id: installer.team.id,
          user_id: installer.botUserId,
          bot_id: 'B0BERTHBOT',
          is_enterprise_install: false,
        })
      case 'auth.revoke':
        book.revoke(token)
        return reply({ ok: true, revoked: true })
      case 'chat.postMessage': {
        if (!check.grant.scopes.includes('chat:write'))
          return reply({
            ok: false,
            error: 'missing_scope',
            needed: 'chat:write',
            provided: check.grant.scopes.join(','),
          })
        const failure = failures.shift()
        if (failure) return reply({ ok: false, error: failure })
        const wanted = (form.get('channel') ?? '').replace(/^#/, '')
        const channel = channels.find((c) => c.id === wanted || c.name === wanted)
        if (!channel) return reply({ ok: false, error: 'channel_not_found' })
        const text = form.get('text') ?? ''
        const blocks = form.has('blocks') ? (JSON.parse(form.get('blocks')!) as unknown[]) : null
        if (!text && !blocks) return reply({ ok: false, error: 'no_text' })
        if (text.length > 40_000) return reply({ ok: false, error: 'msg_too_long' })
        const ts = `${Math.floor(now() / 1000)}.${String(++seq).padStart(6, '0')}`
        messages.push({
          channel: channel.id,
          text,
          blocks,
          thread_ts: form.get('thread_ts'),
          ts,
          team_id: installer.team.id,
        })
        return reply({
          ok: true,
          channel: channel.id,
          ts,
          message: { type: 'message', text, user: installer.botUserId, bot_id: 'B0BERTHBOT', ts },
        })
      }
      default:
        return reply({ ok: false, error: 'unknown_method' })
    }
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake')
    const rec: FakeChatRequest = { method: req.method ?? 'GET', path: url.pathname, status: 0 }
    requests.push(rec)
    const handle = async (): Promise<number> => {
      if (req.method === 'GET' && url.pathname === '/oauth/v2/authorize') {
        const back = book.authorize(url.searchParams, { team, botUserId }, decline, ['chat:write'])
        decline = false
        if (!back) {
          res
            .writeHead(400, { 'content-type': 'text/html; charset=utf-8' })
            .end('<h1>Invalid client_id or redirect_uri</h1>')
          return 400
        }
        res.writeHead(302, { location: back.href }).end()
        return 302
      }
      const m = /^\/api\/([a-zA-Z0-9.]+)$/.exec(url.pathname)
      if (req.method === 'POST' && m) return api(m[1]!, req, res, rec)
      return sendJson(res, 404, { ok: false, error: 'unknown_method' })
    }
    handle().then(
      (status) => (rec.status = status),
      (err: unknown) => (rec.status = sendJson(res, 500, { ok: false, error: 'fatal_error', detail: String(err) })),
    )
  })
  const host = opts.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port ?? 0, host, () => resolve())
  })
  const url = `http://${host}:${(server.address() as AddressInfo).port}`
  const signatureHeaders = (body: string, timestamp = Math.floor(now() / 1000), secret = signingSecret) => ({
    'x-request-timestamp': String(timestamp),
    'x-signature': chatSignature(secret, timestamp, body),
  })

  return {
    url,
    clientId,
    clientSecret,
    signingSecret,
    team,
    botUserId,
    requests,
    messages,
    config: () => ({
      clientId,
      clientSecret,
      signingSecret,
      authorizeUrl: `${url}/oauth/v2/authorize`,
      tokenUrl: `${url}/api/oauth.v2.access`,
      apiBaseUrl: `${url}/api`,
    }),
    issuedTokens: book.issuedTokens,
    activeGrants: book.activeGrants,
    revokeAll: () => book.revokeAll(),
    declineNext: () => {
      decline = true
    },
    failNext: (error) => {
      failures = [...failures, error]
    },
    messageEvent: (text, o = {}) => {
      const mention = o.mention ?? true
      const at = Math.floor(now() / 1000)
      const ts = `${at}.${String(++seq).padStart(6, '0')}`
      return {
        token: 'deprecated-verification-token',
        team_id: team.id,
        api_app_id: 'A0BERTHAPP',
        event: {
          type: mention ? 'app_mention' : 'message',
          user: o.user ?? 'U0ALICE',
          text: mention ? `<@${botUserId}> ${text}` : text,
          ts,
          channel: o.channel ?? channels[0]?.id ?? 'C0GENERAL',
          event_ts: ts,
        },
        type: 'event_callback',
        event_id: o.eventId ?? `Ev${randomHex(5).toUpperCase()}`,
        event_time: at,
        authorizations: [{ team_id: team.id, user_id: botUserId, is_bot: true }],
      }
    },
    urlVerification: (challenge = randomHex(16)) => ({
      token: 'deprecated-verification-token',
      challenge,
      type: 'url_verification',
    }),
    signatureHeaders,
    sendEvent: (target, payload, o = {}) => {
      const body = JSON.stringify(payload)
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        ...signatureHeaders(body, o.timestamp, o.secret),
      }
      if (o.signature !== undefined) headers['x-signature'] = o.signature
      for (const h of o.omit ?? []) delete headers[h]
      return fetch(target, { method: 'POST', headers, body })
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
