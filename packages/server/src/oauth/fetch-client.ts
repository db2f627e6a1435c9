import { ProviderError, systemClock, type Clock, type OAuthClient, type OAuthErrorKind, type OAuthTokens } from '@berth/core'

/** How a provider revokes grants. */
export type OAuthRevocation =
  /** RFC 7009: `POST url` with `token` (+ `token_type_hint`) and the client credentials. */
  | { style: 'rfc7009'; url: string }
  /** GitHub: `DELETE url` (`/applications/<client_id>/grant`) with Basic client auth and `{ access_token }`. */
  | { style: 'github-grant'; url: string }

/** One provider's authorization server, as the generic client talks to it. */
export interface FetchOAuthClientOptions {
  clientId: string
  clientSecret: string
  authorizeUrl: string
  tokenUrl: string
  /** Revocation endpoint; null when the provider has none (disconnecting is then local). */
  revocation: OAuthRevocation | null
  /** Scopes to request (omitted from the URL when empty). */
  scopes: string[]
  /** Send the client credentials as HTTP Basic (`basic`, e.g. Bitbucket) or in the form body (`body`). */
  clientAuth: 'basic' | 'body'
  /** Send a PKCE S256 challenge and verifier. */
  pkce: boolean
  clock?: Clock
  fetch?: typeof fetch
  /** Per request (default 10 s). */
  timeoutMs?: number
}

/** Provider error codes that mean "the code or refresh token is no good: authorize again". */
const GRANT_ERRORS = new Set(['invalid_grant', 'bad_verification_code', 'bad_refresh_token', 'expired_token', 'invalid_token', 'access_denied'])

function classify(code: string): OAuthErrorKind {
  return GRANT_ERRORS.has(code) ? 'invalid_grant' : 'client'
}

function basic(user: string, pass: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(user)}:${encodeURIComponent(pass)}`).toString('base64')}`
}

/**
 * A generic OAuth 2 client (RFC 6749 authorization code + refresh, RFC 7636 PKCE, RFC 7009
 * revocation, and GitHub's variants: errors in a 200 body, comma-separated scopes, grant
 * deletion) over `fetch`, against configurable URLs. Errors are `ProviderError`s of `oauth`:
 * `invalid_grant` for a bad code or a revoked refresh token, `client` for a refused client,
 * `unavailable` for anything unreachable or unreadable.
 *
 * @example
 * ```ts
 * const client = createFetchOAuthClient({
 *   clientId, clientSecret, authorizeUrl: 'https://gitlab.com/oauth/authorize', tokenUrl: 'https://gitlab.com/oauth/token',
 *   revocation: { style: 'rfc7009', url: 'https://gitlab.com/oauth/revoke' }, scopes: ['read_user'], clientAuth: 'body', pkce: true,
 * })
 * const tokens = await client.exchangeCode({ code, redirectUri, codeVerifier })
 * ```
 */
export function createFetchOAuthClient(o: FetchOAuthClientOptions): OAuthClient {
  const clock = o.clock ?? systemClock
  const doFetch = o.fetch ?? fetch
  const timeoutMs = o.timeoutMs ?? 10_000

  async function call(url: string, init: RequestInit): Promise<{ status: number; body: Record<string, unknown> | null }> {
    let res: Response
    try {
      res = await doFetch(url, { ...init, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) })
    } catch (err) {
      throw new ProviderError('oauth', 'unavailable', `could not reach ${new URL(url).host}: ${err instanceof Error ? err.message : String(err)}`)
    }
    const text = await res.text().catch(() => '')
    let body: Record<string, unknown> | null = null
    try {
      const parsed: unknown = JSON.parse(text)
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>
    } catch {
      // A form-encoded answer (GitHub without `Accept: application/json`).
      if (/^[\w.%+-]+=/.test(text)) body = Object.fromEntries(new URLSearchParams(text))
    }
    return { status: res.status, body }
  }

  function clientFields(form: URLSearchParams, headers: Record<string, string>): void {
    if (o.clientAuth === 'basic') headers.authorization = basic(o.clientId, o.clientSecret)
    else {
      form.set('client_id', o.clientId)
      form.set('client_secret', o.clientSecret)
    }
  }

  async function token(form: URLSearchParams): Promise<OAuthTokens> {
    const headers: Record<string, string> = { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' }
    clientFields(form, headers)
    const { status, body } = await call(o.tokenUrl, { method: 'POST', headers, body: form.toString() })
    if (body && typeof body.error === 'string') {
      const desc = typeof body.error_description === 'string' ? `: ${body.error_description.slice(0, 300)}` : ''
      throw new ProviderError('oauth', classify(body.error), `token endpoint refused (${body.error}${desc})`, { code: body.error.slice(0, 100), status })
    }
    if (status >= 500 || !body) throw new ProviderError('oauth', 'unavailable', `token endpoint answered ${status}`, { status })
    if (status >= 400) throw new ProviderError('oauth', status === 401 ? 'client' : 'invalid_grant', `token endpoint answered ${status}`, { status })
    const access = body.access_token
    if (typeof access !== 'string' || access.length === 0) throw new ProviderError('oauth', 'unavailable', 'token endpoint answered without an access_token', { status })
    const expiresIn = Number(body.expires_in)
    const scope = typeof body.scope === 'string' ? body.scope : typeof body.scopes === 'string' ? body.scopes : ''
    return {
      access_token: access,
      refresh_token: typeof body.refresh_token === 'string' && body.refresh_token ? body.refresh_token : null,
      expires_at: Number.isFinite(expiresIn) && expiresIn > 0 ? clock.now() + expiresIn * 1000 : null,
      scopes: scope.split(/[\s,]+/).filter(Boolean),
    }
  }

  return {
    pkce: o.pkce,
    authorizeUrl({ state, redirectUri, codeChallenge }) {
      const url = new URL(o.authorizeUrl)
      url.searchParams.set('response_type', 'code')
      url.searchParams.set('client_id', o.clientId)
      url.searchParams.set('redirect_uri', redirectUri)
      if (o.scopes.length) url.searchParams.set('scope', o.scopes.join(' '))
      url.searchParams.set('state', state)
      if (o.pkce && codeChallenge) {
        url.searchParams.set('code_challenge', codeChallenge)
        url.searchParams.set('code_challenge_method', 'S256')
      }
      return url.href
    },
    exchangeCode({ code, redirectUri, codeVerifier }) {
      const form = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri })
      if (o.pkce && codeVerifier) form.set('code_verifier', codeVerifier)
      return token(form)
    },
    refresh(refreshToken) {
      return token(new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken }))
    },
    async revoke(tokens) {
      const r = o.revocation
      if (!r) return
      if (r.style === 'github-grant') {
        const { status } = await call(r.url, {
          method: 'DELETE',
          headers: { authorization: basic(o.clientId, o.clientSecret), accept: 'application/vnd.github+json', 'content-type': 'application/json', 'user-agent': 'berth' },
          body: JSON.stringify({ access_token: tokens.access_token }),
        })
        // 404: the grant is already gone.
        if (status !== 204 && status !== 404) throw new ProviderError('oauth', status >= 500 ? 'unavailable' : 'client', `grant revocation answered ${status}`, { status })
        return
      }
      // RFC 7009: revoking the refresh token ends the grant; the access token too, for providers that keep them apart.
      const all: [string, string][] = [['access_token', tokens.access_token], ...(tokens.refresh_token ? [['refresh_token', tokens.refresh_token] as [string, string]] : [])]
      for (const [hint, value] of all) {
        const headers: Record<string, string> = { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' }
        const form = new URLSearchParams({ token: value, token_type_hint: hint })
        clientFields(form, headers)
        const { status } = await call(r.url, { method: 'POST', headers, body: form.toString() })
        if (status !== 200) throw new ProviderError('oauth', status >= 500 ? 'unavailable' : 'client', `token revocation answered ${status}`, { status })
      }
    },
  }
}
