import { createHash, randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'

/**
 * The OAuth 2 bookkeeping the fake chat and mail providers share: consent (authorize →
 * redirect with `code` and `state`), single-use codes bound to the client, redirect URI and
 * PKCE challenge, grants with expiring access tokens and (optionally rotating) refresh
 * tokens, and revocation. Each fake wraps it in its own provider's wire format.
 */

/** Why a token request is refused; each fake answers it in its provider's own shape. */
export type GrantFailure = 'bad_client' | 'bad_code' | 'bad_redirect' | 'bad_pkce' | 'bad_refresh' | 'unsupported_grant'

/** One authorization a user gave the client. */
export interface FakeGrant<U> {
  user: U
  scopes: string[]
  /** Null when the consent did not ask for offline access (no refresh token issued). */
  refreshToken: string | null
  revoked: boolean
}

/** A token request's outcome: the grant and the fresh access token, or the failure. */
export type TokenResult<U> =
  | { ok: true; grant: FakeGrant<U>; accessToken: string; ttlSeconds: number; newRefreshToken: string | null }
  | { ok: false; failure: GrantFailure }

/** Whether an access token works now. */
export type AccessCheck<U> =
  | { ok: true; grant: FakeGrant<U> }
  | { ok: false; reason: 'unknown' | 'expired' | 'revoked' }

export interface GrantBookOptions {
  clientId: string
  clientSecret: string
  now: () => number
  accessTtlSeconds: number
  /** Verify a PKCE S256 challenge when the authorize request carried one. */
  pkce: boolean
  /** Issue a new refresh token on every refresh (and retire the old one). */
  rotateRefreshTokens: boolean
  /** Whether an authorize request gets a refresh token (e.g. Google: only with `access_type=offline`). */
  offline: (query: URLSearchParams) => boolean
  accessToken: (random: string) => string
  refreshToken: (random: string) => string
}

interface Code<U> {
  redirectUri: string
  challenge: string | null
  user: U
  scopes: string[]
  offline: boolean
  expiresAt: number
  used: boolean
}

const CODE_TTL_MS = 10 * 60_000

/**
 * Random hex for tokens and codes.
 *
 * @example
 * ```ts
 * randomHex(8) // '9f2c0a1b7d3e4f56'
 * ```
 */
export function randomHex(bytes = 20): string {
  return randomBytes(bytes).toString('hex')
}

/**
 * A request body as text.
 *
 * @example
 * ```ts
 * const raw = await readBody(req)
 * ```
 */
export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.on('error', reject)
  })
}

/**
 * Answer JSON; returns the status (for the request log).
 *
 * @example
 * ```ts
 * return sendJson(res, 200, { ok: true })
 * ```
 */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): number {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers })
  res.end(JSON.stringify(body))
  return status
}

/**
 * A form or JSON request body as parameters (providers accept either on some endpoints).
 *
 * @example
 * ```ts
 * const form = formOf(req, await readBody(req))
 * ```
 */
export function formOf(req: IncomingMessage, raw: string): URLSearchParams {
  if (!(req.headers['content-type'] ?? '').includes('json')) return new URLSearchParams(raw)
  try {
    const parsed = JSON.parse(raw || '{}') as Record<string, unknown>
    return new URLSearchParams(
      Object.entries(parsed).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]),
    )
  } catch {
    return new URLSearchParams()
  }
}

/**
 * The bearer token of a request, if any.
 *
 * @example
 * ```ts
 * bearerOf(req) // 'xoxb-…' or undefined
 * ```
 */
export function bearerOf(req: IncomingMessage): string | undefined {
  return /^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1]
}

/**
 * The grant book of one fake provider and its one registered client.
 *
 * @example
 * ```ts
 * const book = grantBook<User>({ clientId, clientSecret, now: Date.now, accessTtlSeconds: 3600, pkce: true, rotateRefreshTokens: false, offline: () => true, accessToken: (r) => `at-${r}`, refreshToken: (r) => `rt-${r}` })
 * ```
 */
export function grantBook<U>(o: GrantBookOptions) {
  const codes = new Map<string, Code<U>>()
  const grants: FakeGrant<U>[] = []
  const access = new Map<string, { grant: FakeGrant<U>; expiresAt: number }>()
  const issued: string[] = []

  /** Client credentials from HTTP Basic or the form. */
  function clientOk(req: IncomingMessage, form: URLSearchParams): boolean {
    const header = req.headers.authorization
    if (header?.startsWith('Basic ')) {
      const [id, secret] = Buffer.from(header.slice(6), 'base64').toString('utf8').split(':').map(decodeURIComponent)
      return id === o.clientId && secret === o.clientSecret
    }
    return form.get('client_id') === o.clientId && form.get('client_secret') === o.clientSecret
  }

  function issue(grant: FakeGrant<U>, newRefreshToken: string | null): TokenResult<U> {
    const token = o.accessToken(randomHex())
    access.set(token, { grant, expiresAt: o.now() + o.accessTtlSeconds * 1000 })
    issued.push(token)
    if (grant.refreshToken) issued.push(grant.refreshToken)
    return { ok: true, grant, accessToken: token, ttlSeconds: o.accessTtlSeconds, newRefreshToken }
  }

  return {
    /**
     * Consent as `user`: where to send the browser back (with `code`, or `error`), or null
     * when the client or redirect URI is unusable (the provider shows an error page).
     */
    authorize(query: URLSearchParams, user: U, decline: boolean, defaultScopes: string[]): URL | null {
      const redirect = query.get('redirect_uri')
      if (query.get('client_id') !== o.clientId || !redirect || !/^https?:\/\//.test(redirect)) return null
      const back = new URL(redirect)
      const state = query.get('state')
      if (state !== null) back.searchParams.set('state', state)
      const fail = (error: string) => {
        back.searchParams.set('error', error)
        return back
      }
      const challenge = o.pkce ? query.get('code_challenge') : null
      if (challenge !== null && query.get('code_challenge_method') !== 'S256') return fail('invalid_request')
      if (decline) return fail('access_denied')
      const code = randomHex()
      const scopes = (query.get('scope') ?? '').split(/[\s,]+/).filter(Boolean)
      codes.set(code, {
        redirectUri: redirect,
        challenge,
        user,
        scopes: scopes.length ? scopes : defaultScopes,
        offline: o.offline(query),
        expiresAt: o.now() + CODE_TTL_MS,
        used: false,
      })
      back.searchParams.set('code', code)
      return back
    },

    /** The token endpoint: `authorization_code` and `refresh_token` grants. */
    token(req: IncomingMessage, form: URLSearchParams): TokenResult<U> {
      if (!clientOk(req, form)) return { ok: false, failure: 'bad_client' }
      const grantType = form.get('grant_type') ?? (form.has('code') ? 'authorization_code' : '')
      if (grantType === 'authorization_code') {
        const c = codes.get(form.get('code') ?? '')
        if (!c || c.used || c.expiresAt <= o.now()) return { ok: false, failure: 'bad_code' }
        if (form.get('redirect_uri') !== c.redirectUri) return { ok: false, failure: 'bad_redirect' }
        if (c.challenge !== null) {
          const verifier = form.get('code_verifier')
          if (!verifier || createHash('sha256').update(verifier).digest('base64url') !== c.challenge)
            return { ok: false, failure: 'bad_pkce' }
        }
        c.used = true
        const grant: FakeGrant<U> = {
          user: c.user,
          scopes: c.scopes,
          refreshToken: c.offline ? o.refreshToken(randomHex()) : null,
          revoked: false,
        }
        grants.push(grant)
        return issue(grant, grant.refreshToken)
      }
      if (grantType === 'refresh_token') {
        const value = form.get('refresh_token')
        const grant = grants.find((g) => g.refreshToken !== null && g.refreshToken === value)
        if (!grant || grant.revoked) return { ok: false, failure: 'bad_refresh' }
        if (o.rotateRefreshTokens) grant.refreshToken = o.refreshToken(randomHex())
        return issue(grant, o.rotateRefreshTokens ? grant.refreshToken : null)
      }
      return { ok: false, failure: 'unsupported_grant' }
    },

    check(token: string | undefined): AccessCheck<U> {
      const a = token ? access.get(token) : undefined
      if (!a) return { ok: false, reason: 'unknown' }
      if (a.grant.revoked) return { ok: false, reason: 'revoked' }
      if (a.expiresAt <= o.now()) return { ok: false, reason: 'expired' }
      return { ok: true, grant: a.grant }
    },

    /** Revoke the grant an access or refresh token belongs to; false when the token is unknown or already revoked. */
    revoke(token: string): boolean {
      const grant = access.get(token)?.grant ?? grants.find((g) => g.refreshToken === token)
      if (!grant || grant.revoked) return false
      grant.revoked = true
      return true
    },

    revokeAll(match: (user: U) => boolean = () => true): void {
      for (const g of grants) if (match(g.user)) g.revoked = true
    },

    issuedTokens: () => [...new Set(issued)],
    activeGrants: () => grants.filter((g) => !g.revoked).length,
  }
}
