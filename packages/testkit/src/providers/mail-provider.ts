import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { bearerOf, formOf, grantBook, randomHex, readBody, sendJson, type GrantFailure } from './chat-mail-grants.js'

/** The mailbox owner who consents at the fake mail provider. */
export interface FakeMailUser {
  /** The stable account id (OpenID `sub`). */
  sub: string
  email: string
}

/** Options of {@link startFakeMailProvider}. */
export interface FakeMailProviderOptions {
  clientId?: string
  clientSecret?: string
  /** Default `{ sub: '104200000000000000042', email: 'ada@mail.example' }`. */
  user?: FakeMailUser
  /** The provider's clock in ms (default `Date.now`). */
  now?: () => number
  /** Access-token lifetime in seconds (default 3599, like Google). */
  accessTokenTtlSeconds?: number
  host?: string
  port?: number
}

/** What `createBerth({ mailProvider })` needs to talk to the fake. */
export interface FakeMailProviderConfig {
  clientId: string
  clientSecret: string
  authorizeUrl: string
  tokenUrl: string
  apiBaseUrl: string
  userinfoUrl: string
  revokeUrl: string
}

/** One request the fake answered (token values are not kept). */
export interface FakeMailRequest {
  method: string
  path: string
  grant_type?: string
  /** Authorize: whether `access_type=offline` was asked for; token endpoint: whether a `code_verifier` came. */
  offline?: boolean
  pkce?: boolean
  status: number
}

/** A message the send API accepted, decoded. */
export interface FakeSentMail {
  id: string
  /** The sender as the provider sends it: always the authenticated mailbox. */
  from: string
  to: string[]
  subject: string
  /** Header names lower-cased, values unfolded and RFC 2047-decoded. */
  headers: Record<string, string>
  /** The decoded text body. */
  text: string
  /** The base64url `raw` as received. */
  raw: string
}

/** A running fake mail provider. */
export interface FakeMailProvider {
  url: string
  clientId: string
  clientSecret: string
  user: FakeMailUser
  config(): FakeMailProviderConfig
  requests: FakeMailRequest[]
  /** Every message sent, oldest first. */
  sent: FakeSentMail[]
  issuedTokens(): string[]
  activeGrants(): number
  /** The user removes the app's access: every grant ends. */
  revokeAll(): void
  declineNext(): void
  close(): Promise<void>
}

const SEND_SCOPE = 'https://www.googleapis.com/auth/gmail.send'

/** Token-endpoint failures in Google's shape. */
const TOKEN_ERRORS: Record<GrantFailure, { status: number; body: Record<string, string> }> = {
  bad_client: { status: 401, body: { error: 'invalid_client', error_description: 'The OAuth client was not found.' } },
  bad_code: { status: 400, body: { error: 'invalid_grant', error_description: 'Bad Request' } },
  bad_redirect: { status: 400, body: { error: 'redirect_uri_mismatch', error_description: 'Bad Request' } },
  bad_pkce: { status: 400, body: { error: 'invalid_grant', error_description: 'Invalid code verifier.' } },
  bad_refresh: {
    status: 400,
    body: { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' },
  },
  unsupported_grant: {
    status: 400,
    body: { error: 'unsupported_grant_type', error_description: 'Invalid grant_type: ' },
  },
}

/** An API error in Google's shape `{ error: { code, message, errors, status } }`. */
function apiError(res: ServerResponse, code: number, status: string, message: string, reason: string): number {
  return sendJson(
    res,
    code,
    { error: { code, message, errors: [{ message, domain: 'global', reason }], status } },
    code === 401 ? { 'www-authenticate': 'Bearer realm="https://accounts.google.com/", error="invalid_token"' } : {},
  )
}

/** RFC 2047 encoded words (`=?UTF-8?B?…?=`, `=?UTF-8?Q?…?=`) decoded. */
function decodeWords(value: string): string {
  return value.replace(
    /=\?([^?]+)\?([BbQq])\?([^?]*)\?=(\s+(?==\?))?/g,
    (_, _charset: string, enc: string, text: string) =>
      enc.toUpperCase() === 'B'
        ? Buffer.from(text, 'base64').toString('utf8')
        : Buffer.from(
            text
              .replace(/_/g, ' ')
              .replace(/=([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
            'latin1',
          ).toString('utf8'),
  )
}

/**
 * A single-part RFC 2822 message decoded: unfolded headers, the text body per its
 * `Content-Transfer-Encoding` (base64, quoted-printable, 7bit/8bit). Null when it has no
 * header/body separator.
 */
function parseMessage(message: string): { headers: Record<string, string>; text: string } | null {
  const split = message.search(/\r?\n\r?\n/)
  if (split < 0) return null
  const head = message.slice(0, split).replace(/\r?\n[ \t]+/g, ' ')
  const body = message.slice(split).replace(/^\r?\n\r?\n/, '')
  const headers: Record<string, string> = {}
  for (const line of head.split(/\r?\n/)) {
    const i = line.indexOf(':')
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = decodeWords(line.slice(i + 1).trim())
  }
  const cte = (headers['content-transfer-encoding'] ?? '7bit').toLowerCase()
  const text =
    cte === 'base64'
      ? Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8')
      : cte === 'quoted-printable'
        ? Buffer.from(
            body
              .replace(/=\r?\n/g, '')
              .replace(/=([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
            'latin1',
          ).toString('utf8')
        : body
  return { headers, text }
}

/** Addresses of a To/Cc header: `A <a@x>, b@y` → `['a@x', 'b@y']`. */
function addresses(value: string | undefined): string[] {
  if (!value) return []
  return value
    .split(',')
    .map((part) => (/<([^>]+)>/.exec(part)?.[1] ?? part).trim())
    .filter((a) => /^[^\s@]+@[^\s@]+$/.test(a))
}

/**
 * A local fake of a Gmail-like mail provider, over real HTTP:
 * - OAuth 2 as Google serves it: `GET /o/oauth2/v2/auth` (refresh tokens only with
 *   `access_type=offline`), `POST /token` (`authorization_code` with PKCE S256 and redirect
 *   URI checked, `refresh_token`; refresh tokens do not rotate; errors
 *   `{ error, error_description }` with 400/401), `POST /revoke?token=`;
 * - OpenID `GET /v1/userinfo` (`sub`, `email`);
 * - `POST /gmail/v1/users/me/messages/send` with `{ raw: base64url(RFC 2822) }`: decoded and
 *   recorded; 401 `UNAUTHENTICATED` for expired, revoked or unknown tokens and 403 without
 *   the `gmail.send` scope, in Google's error shape.
 *
 * @example
 * ```ts
 * const mail = await startFakeMailProvider({ now: () => clock.now() })
 * const berth = createBerth({ mailProvider: mail.config() })
 * // ... later
 * mail.sent[0].subject // 'Berth: task task_… completed'
 * ```
 */
export async function startFakeMailProvider(opts: FakeMailProviderOptions = {}): Promise<FakeMailProvider> {
  const clientId = opts.clientId ?? `${randomHex(6)}-fake.apps.mail.example`
  const clientSecret = opts.clientSecret ?? `GOCSPX-${randomHex(14)}`
  const user = opts.user ?? { sub: '104200000000000000042', email: 'ada@mail.example' }
  const now = opts.now ?? Date.now
  const book = grantBook<FakeMailUser>({
    clientId,
    clientSecret,
    now,
    accessTtlSeconds: opts.accessTokenTtlSeconds ?? 3599,
    pkce: true,
    rotateRefreshTokens: false,
    offline: (q) => q.get('access_type') === 'offline',
    accessToken: (r) => `ya29.a0${r}`,
    refreshToken: (r) => `1//0g${r}`,
  })
  const requests: FakeMailRequest[] = []
  const sent: FakeSentMail[] = []
  let decline = false

  async function token(req: IncomingMessage, res: ServerResponse, rec: FakeMailRequest): Promise<number> {
    const form = formOf(req, await readBody(req))
    rec.grant_type = form.get('grant_type') ?? ''
    rec.pkce = form.has('code_verifier')
    const r = book.token(req, form)
    if (!r.ok) return sendJson(res, TOKEN_ERRORS[r.failure].status, TOKEN_ERRORS[r.failure].body)
    return sendJson(res, 200, {
      access_token: r.accessToken,
      expires_in: r.ttlSeconds,
      // Only the code exchange hands out the refresh token; refreshing keeps it.
      ...(rec.grant_type === 'authorization_code' && r.grant.refreshToken && { refresh_token: r.grant.refreshToken }),
      scope: r.grant.scopes.join(' '),
      token_type: 'Bearer',
    })
  }

  async function send(req: IncomingMessage, res: ServerResponse, grantUser: FakeMailUser): Promise<number> {
    let raw: unknown
    try {
      raw = (JSON.parse(await readBody(req)) as { raw?: unknown }).raw
    } catch {
      return apiError(res, 400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.', 'badRequest')
    }
    if (typeof raw !== 'string' || raw.length === 0)
      return apiError(
        res,
        400,
        'INVALID_ARGUMENT',
        "'raw' RFC822 payload message string or uploading message via /upload/* URL required",
        'invalidArgument',
      )
    const message = parseMessage(Buffer.from(raw, 'base64url').toString('utf8'))
    if (!message) return apiError(res, 400, 'INVALID_ARGUMENT', 'Invalid RFC822 message', 'invalidArgument')
    const to = [...addresses(message.headers.to), ...addresses(message.headers.cc)]
    if (to.length === 0) return apiError(res, 400, 'INVALID_ARGUMENT', 'Recipient address required', 'invalidArgument')
    const id = randomHex(8)
    sent.push({
      id,
      from: grantUser.email,
      to,
      subject: message.headers.subject ?? '',
      headers: message.headers,
      text: message.text,
      raw,
    })
    return sendJson(res, 200, { id, threadId: id, labelIds: ['SENT'] })
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake')
    const rec: FakeMailRequest = { method: req.method ?? 'GET', path: url.pathname, status: 0 }
    requests.push(rec)
    const handle = async (): Promise<number> => {
      if (req.method === 'GET' && url.pathname === '/o/oauth2/v2/auth') {
        rec.offline = url.searchParams.get('access_type') === 'offline'
        rec.pkce = url.searchParams.has('code_challenge')
        const back = book.authorize(url.searchParams, user, decline, ['openid', 'email', SEND_SCOPE])
        decline = false
        if (!back) {
          res
            .writeHead(400, { 'content-type': 'text/html; charset=utf-8' })
            .end('<h1>Error 400: redirect_uri_mismatch</h1>')
          return 400
        }
        res.writeHead(302, { location: back.href }).end()
        return 302
      }
      if (req.method === 'POST' && url.pathname === '/token') return token(req, res, rec)
      if (req.method === 'POST' && url.pathname === '/revoke') {
        const value = url.searchParams.get('token') ?? formOf(req, await readBody(req)).get('token') ?? ''
        return book.revoke(value)
          ? sendJson(res, 200, {})
          : sendJson(res, 400, { error: 'invalid_token', error_description: 'Token expired or revoked' })
      }
      const check = book.check(bearerOf(req))
      if (url.pathname === '/v1/userinfo' || url.pathname.startsWith('/gmail/')) {
        if (!check.ok)
          return apiError(
            res,
            401,
            'UNAUTHENTICATED',
            'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
            'authError',
          )
        if (req.method === 'GET' && url.pathname === '/v1/userinfo') {
          if (!check.grant.scopes.includes('email'))
            return apiError(
              res,
              403,
              'PERMISSION_DENIED',
              'Request had insufficient authentication scopes.',
              'insufficientPermissions',
            )
          return sendJson(res, 200, { sub: check.grant.user.sub, email: check.grant.user.email, email_verified: true })
        }
        if (req.method === 'POST' && url.pathname === '/gmail/v1/users/me/messages/send') {
          if (!check.grant.scopes.includes(SEND_SCOPE))
            return apiError(
              res,
              403,
              'PERMISSION_DENIED',
              'Request had insufficient authentication scopes.',
              'insufficientPermissions',
            )
          return send(req, res, check.grant.user)
        }
      }
      return apiError(res, 404, 'NOT_FOUND', 'Requested entity was not found.', 'notFound')
    }
    handle().then(
      (status) => (rec.status = status),
      (err: unknown) => (rec.status = apiError(res, 500, 'INTERNAL', String(err), 'backendError')),
    )
  })
  const host = opts.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port ?? 0, host, () => resolve())
  })
  const url = `http://${host}:${(server.address() as AddressInfo).port}`
  return {
    url,
    clientId,
    clientSecret,
    user,
    requests,
    sent,
    config: () => ({
      clientId,
      clientSecret,
      authorizeUrl: `${url}/o/oauth2/v2/auth`,
      tokenUrl: `${url}/token`,
      apiBaseUrl: url,
      userinfoUrl: `${url}/v1/userinfo`,
      revokeUrl: `${url}/revoke`,
    }),
    issuedTokens: book.issuedTokens,
    activeGrants: book.activeGrants,
    revokeAll: () => book.revokeAll(),
    declineNext: () => {
      decline = true
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
