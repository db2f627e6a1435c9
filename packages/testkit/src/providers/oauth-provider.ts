/** A local fake of a hosted Git provider's OAuth 2 server and user API (GitHub-, GitLab- or Bitbucket-shaped), over real HTTP. */
import { createHash, randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { PROVIDER_SHAPES, type FakeGitUser, type TokenErrorKind } from './git-provider-shapes.js'
import type { FakeGitProviderOptions, FakeProviderRequest, FakeGitProvider } from './oauth-provider-types.js'

interface Code {
  clientId: string
  redirectUri: string
  challenge: string | null
  user: FakeGitUser
  scopes: string[]
  expiresAt: number
  used: boolean
}

interface Grant {
  user: FakeGitUser
  scopes: string[]
  refreshToken: string
  revoked: boolean
}

const CODE_TTL_MS = 10 * 60_000

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}

function sendJson(res: ServerResponse, status: number, body: unknown): number {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' })
  res.end(JSON.stringify(body))
  return status
}

const random = () => randomBytes(20).toString('hex')

/**
 * A local fake of a hosted Git provider's OAuth 2 server and user API, GitHub-, GitLab- or
 * Bitbucket-shaped ({@link PROVIDER_SHAPES}): the authorize endpoint "consents" as the
 * configured user and redirects back with `code` and `state` (or `error=access_denied`);
 * the token endpoint serves the `authorization_code` grant (single-use codes, redirect URI
 * and PKCE S256 checked) and the `refresh_token` grant (rotating refresh tokens where the
 * provider does); access tokens expire by the given clock; grants can be revoked (by the
 * provider's revocation endpoint, or `revokeAll()` as if the user removed the app); errors
 * come in each provider's own shape and status.
 *
 * @example
 * ```ts
 * const github = await startFakeGitProvider({ provider: 'github', now: () => clock.now() })
 * const berth = createBerth({ gitProviders: { github: github.config() } })
 * ```
 */
export async function startFakeGitProvider(opts: FakeGitProviderOptions): Promise<FakeGitProvider> {
  const shape = PROVIDER_SHAPES[opts.provider]
  const clientId = opts.clientId ?? `client-${random().slice(0, 12)}`
  const clientSecret = opts.clientSecret ?? `secret-${random()}`
  const now = opts.now ?? Date.now
  const ttl = opts.accessTokenTtlSeconds ?? shape.accessTtl
  let user: FakeGitUser = opts.user ?? { login: `octo-${opts.provider}`, id: 4242 }
  let decline = false
  const codes = new Map<string, Code>()
  const grants: Grant[] = []
  const access = new Map<string, { grant: Grant; expiresAt: number }>()
  const requests: FakeProviderRequest[] = []
  const issued: string[] = []

  const tokenError = (res: ServerResponse, kind: TokenErrorKind) => {
    const { status, body } = shape.tokenError(kind)
    return sendJson(res, status, body)
  }

  const issue = (grant: Grant) => {
    const token = shape.newAccessToken(random())
    access.set(token, { grant, expiresAt: now() + ttl * 1000 })
    issued.push(token, grant.refreshToken)
    return shape.tokenBody({ access: token, refresh: grant.refreshToken, ttl, scopes: grant.scopes })
  }

  /** The client the request authenticates as, or null. */
  const clientOf = (req: IncomingMessage, form: URLSearchParams): boolean => {
    const header = req.headers.authorization
    if (header?.startsWith('Basic ') && shape.clientAuth.includes('basic')) {
      const [id, secret] = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':').map(decodeURIComponent)
      return id === clientId && secret === clientSecret
    }
    if (shape.clientAuth.includes('body'))
      return form.get('client_id') === clientId && form.get('client_secret') === clientSecret
    return false
  }

  const validAccess = (token: string | undefined) => {
    const a = token ? access.get(token) : undefined
    if (!a) return { ok: false as const, expired: false }
    if (a.grant.revoked) return { ok: false as const, expired: false }
    if (a.expiresAt <= now()) return { ok: false as const, expired: true }
    return { ok: true as const, grant: a.grant }
  }

  function authorize(url: URL, res: ServerResponse): number {
    const q = url.searchParams
    const redirect = q.get('redirect_uri')
    if (q.get('client_id') !== clientId || !redirect || !/^https?:\/\//.test(redirect)) {
      res.writeHead(400, { 'content-type': 'text/html; charset=utf-8' })
      res.end('<h1>The application is not valid</h1>')
      return 400
    }
    const back = new URL(redirect)
    const state = q.get('state')
    if (state !== null) back.searchParams.set('state', state)
    const challenge = shape.pkce ? q.get('code_challenge') : null
    const fail = (error: string, description: string) => {
      back.searchParams.set('error', error)
      back.searchParams.set('error_description', description)
      res.writeHead(302, { location: back.href })
      res.end()
      return 302
    }
    if (q.get('response_type') !== 'code') return fail('unsupported_response_type', 'response_type must be code')
    if (challenge !== null && q.get('code_challenge_method') !== 'S256')
      return fail('invalid_request', 'code_challenge_method must be S256')
    if (decline) {
      decline = false
      return fail('access_denied', 'The user has denied your application access.')
    }
    const code = random()
    const scopes = (q.get('scope') ?? '').split(/[\s,]+/).filter(Boolean)
    codes.set(code, {
      clientId,
      redirectUri: redirect,
      challenge,
      user,
      scopes: scopes.length ? scopes : shape.defaultScopes,
      expiresAt: now() + CODE_TTL_MS,
      used: false,
    })
    back.searchParams.set('code', code)
    res.writeHead(302, { location: back.href })
    res.end()
    return 302
  }

  async function token(req: IncomingMessage, res: ServerResponse, rec: FakeProviderRequest): Promise<number> {
    const raw = await readBody(req)
    const form = (req.headers['content-type'] ?? '').includes('json')
      ? new URLSearchParams(JSON.parse(raw || '{}') as Record<string, string>)
      : new URLSearchParams(raw)
    rec.grant_type = form.get('grant_type') ?? ''
    rec.pkce = form.has('code_verifier')
    if (!clientOf(req, form)) return tokenError(res, 'bad_client')
    if (rec.grant_type === 'authorization_code') {
      const c = codes.get(form.get('code') ?? '')
      if (!c || c.used || c.expiresAt <= now()) return tokenError(res, 'bad_code')
      if (form.get('redirect_uri') !== c.redirectUri) return tokenError(res, 'bad_request')
      if (c.challenge !== null) {
        const verifier = form.get('code_verifier')
        if (!verifier || createHash('sha256').update(verifier).digest('base64url') !== c.challenge)
          return tokenError(res, 'bad_pkce')
      }
      c.used = true
      const grant: Grant = {
        user: c.user,
        scopes: c.scopes,
        refreshToken: shape.newRefreshToken(random()),
        revoked: false,
      }
      grants.push(grant)
      return sendJson(res, 200, issue(grant))
    }
    if (rec.grant_type === 'refresh_token') {
      const grant = grants.find((g) => g.refreshToken === form.get('refresh_token'))
      if (!grant || grant.revoked) return tokenError(res, 'bad_refresh')
      if (shape.rotatesRefreshToken) grant.refreshToken = shape.newRefreshToken(random())
      return sendJson(res, 200, issue(grant))
    }
    return tokenError(res, 'unsupported_grant')
  }

  async function revoke(req: IncomingMessage, res: ServerResponse): Promise<number> {
    const raw = await readBody(req)
    if (shape.revoke?.method === 'DELETE') {
      // GitHub: Basic client auth, JSON `{ access_token }`.
      const header = req.headers.authorization ?? ''
      const [id, secret] = Buffer.from(header.replace(/^Basic /, ''), 'base64')
        .toString('utf8')
        .split(':')
      if (id !== clientId || secret !== clientSecret) return sendJson(res, 401, shape.unauthorizedBody(false))
      const a = access.get((JSON.parse(raw || '{}') as { access_token?: string }).access_token ?? '')
      if (!a || a.grant.revoked)
        return sendJson(res, 404, { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' })
      a.grant.revoked = true
      res.writeHead(204).end()
      return 204
    }
    const form = new URLSearchParams(raw)
    if (!clientOf(req, form)) return tokenError(res, 'bad_client')
    const value = form.get('token') ?? ''
    const grant = access.get(value)?.grant ?? grants.find((g) => g.refreshToken === value)
    if (grant) grant.revoked = true
    // RFC 7009: unknown tokens are not an error.
    return sendJson(res, 200, {})
  }

  function api(req: IncomingMessage, res: ServerResponse, path: string): number {
    const auth = req.headers.authorization ?? ''
    const token = /^(?:Bearer|token)\s+(\S+)$/i.exec(auth)?.[1]
    const v = validAccess(token)
    if (!v.ok) return sendJson(res, 401, shape.unauthorizedBody(v.expired))
    if (req.method === 'GET' && path === `${shape.apiPrefix}/user`)
      return sendJson(res, 200, shape.userBody(v.grant.user))
    return sendJson(
      res,
      404,
      opts.provider === 'bitbucket'
        ? { type: 'error', error: { message: 'Resource not found' } }
        : { message: '404 Not Found' },
    )
  }

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://fake')
    const rec: FakeProviderRequest = { method: req.method ?? 'GET', path: url.pathname, status: 0 }
    requests.push(rec)
    const revokePath = shape.revoke?.path.replace(':client_id', encodeURIComponent(clientId))
    const handle = async (): Promise<number> => {
      if (req.method === 'GET' && url.pathname === shape.authorizePath) {
        rec.pkce = url.searchParams.has('code_challenge')
        return authorize(url, res)
      }
      if (req.method === 'POST' && url.pathname === shape.tokenPath) return token(req, res, rec)
      if (shape.revoke && req.method === shape.revoke.method && url.pathname === revokePath) return revoke(req, res)
      if (url.pathname.startsWith(`${shape.apiPrefix}/`)) return api(req, res, url.pathname)
      return sendJson(res, 404, { message: 'Not Found' })
    }
    handle().then(
      (status) => (rec.status = status),
      (err: unknown) => {
        rec.status = sendJson(res, 500, { message: String(err) })
      },
    )
  })
  const host = opts.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port ?? 0, host, () => resolve())
  })
  const url = `http://${host}:${(server.address() as AddressInfo).port}`
  return {
    provider: opts.provider,
    url,
    clientId,
    clientSecret,
    requests,
    config: () => ({
      clientId,
      clientSecret,
      authorizeUrl: `${url}${shape.authorizePath}`,
      tokenUrl: `${url}${shape.tokenPath}`,
      apiBaseUrl: `${url}${shape.apiPrefix}`,
      revokeUrl: shape.revoke ? `${url}${shape.revoke.path.replace(':client_id', encodeURIComponent(clientId))}` : null,
    }),
    tokenOwner: (t) => {
      const v = validAccess(t)
      return v.ok ? v.grant.user.login : null
    },
    issuedTokens: () => [...new Set(issued)],
    activeGrants: () => grants.filter((g) => !g.revoked).length,
    revokeAll: (login) => {
      for (const g of grants) if (login === undefined || g.user.login === login) g.revoked = true
    },
    declineNext: () => {
      decline = true
    },
    setUser: (u) => {
      user = u
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
