import {
  ProviderError,
  systemClock,
  type Clock,
  type OAuthClient,
  type OAuthErrorKind,
  type OAuthTokens,
} from '@berth/core'
import * as oauth from 'oauth4webapi'

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
const GRANT_ERRORS = new Set([
  'invalid_grant',
  'bad_verification_code',
  'bad_refresh_token',
  'expired_token',
  'invalid_token',
  'access_denied',
])

function classify(code: string): OAuthErrorKind {
  return GRANT_ERRORS.has(code) ? 'invalid_grant' : 'client'
}

function basic(user: string, pass: string): string {
  return `Basic ${Buffer.from(`${encodeURIComponent(user)}:${encodeURIComponent(pass)}`).toString('base64')}`
}

/** A JSON object body, or a form-encoded one (GitHub without `Accept: application/json`); null for anything else. */
async function readBody(res: Response): Promise<Record<string, unknown> | null> {
  const text = await res.text().catch(() => '')
  try {
    const parsed: unknown = JSON.parse(text)
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null
  } catch {
    return /^[\w.%+-]+=/.test(text) ? Object.fromEntries(new URLSearchParams(text)) : null
  }
}

/**
 * A generic OAuth 2 client (RFC 6749 authorization code + refresh, RFC 7636 PKCE, RFC 7009
 * revocation) built on oauth4webapi, with GitHub's variants (errors in a 200 body,
 * comma-separated scopes, grant deletion) and Slack's `bot` token type, against
 * configurable URLs. Plain `http` endpoints (local fakes) are allowed for those endpoints
 * only; `https` ones are held to oauth4webapi's checks. Errors are `ProviderError`s of
 * `oauth`: `invalid_grant` for a bad code or a revoked refresh token, `client` for a
 * refused client, `unavailable` for anything unreachable or unreadable.
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
  const as: oauth.AuthorizationServer = {
    issuer: new URL(o.tokenUrl).origin,
    authorization_endpoint: o.authorizeUrl,
    token_endpoint: o.tokenUrl,
    revocation_endpoint: o.revocation?.style === 'rfc7009' ? o.revocation.url : undefined,
  }
  const client: oauth.Client = { client_id: o.clientId }
  const auth =
    o.clientAuth === 'basic' ? oauth.ClientSecretBasic(o.clientSecret) : oauth.ClientSecretPost(o.clientSecret)
  /** Request options for `url`: plain http only where the configured endpoint is http. */
  const options = (url: string) => ({
    [oauth.customFetch]: doFetch,
    [oauth.allowInsecureRequests]: new URL(url).protocol === 'http:',
    signal: () => AbortSignal.timeout(timeoutMs),
  })

  /** The answer of a request, or `unavailable` when it did not arrive. */
  async function send(url: string, request: () => Promise<Response>): Promise<Response> {
    try {
      return await request()
    } catch (err) {
      throw new ProviderError(
        'oauth',
        'unavailable',
        `could not reach ${new URL(url).host}: ${err instanceof Error ? err.message : String(err)}`,
      )
    }
  }

  async function token(
    request: () => Promise<Response>,
    process: (res: Response) => Promise<oauth.TokenEndpointResponse>,
  ): Promise<OAuthTokens> {
    const res = await send(o.tokenUrl, request)
    const { status } = res
    // The provider's own error first: GitHub answers errors with a 200 and an `error` field.
    const body = await readBody(res.clone())
    if (body && typeof body.error === 'string') {
      const desc = typeof body.error_description === 'string' ? `: ${body.error_description.slice(0, 300)}` : ''
      throw new ProviderError('oauth', classify(body.error), `token endpoint refused (${body.error}${desc})`, {
        code: body.error.slice(0, 100),
        status,
      })
    }
    if (status >= 500 || !body)
      throw new ProviderError('oauth', 'unavailable', `token endpoint answered ${status}`, { status })
    if (status >= 400)
      throw new ProviderError(
        'oauth',
        status === 401 ? 'client' : 'invalid_grant',
        `token endpoint answered ${status}`,
        { status },
      )
    let tokens: oauth.TokenEndpointResponse
    try {
      tokens = await process(res)
    } catch (err) {
      throw new ProviderError(
        'oauth',
        'unavailable',
        `token endpoint answered an unusable response: ${err instanceof Error ? err.message : String(err)}`,
        { status },
      )
    }
    const expiresIn = tokens.expires_in ?? 0
    const scope = typeof tokens.scope === 'string' ? tokens.scope : typeof body.scopes === 'string' ? body.scopes : ''
    return {
      access_token: tokens.access_token,
      refresh_token: tokens.refresh_token || null,
      expires_at: Number.isFinite(expiresIn) && expiresIn > 0 ? clock.now() + expiresIn * 1000 : null,
      scopes: scope.split(/[\s,]+/).filter(Boolean),
    }
  }

  // Slack's token endpoint answers `token_type: "bot"`: a bearer token by another name.
  const processing = { recognizedTokenTypes: { bot: () => {} } }

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
    async exchangeCode({ code, redirectUri, codeVerifier }) {
      // What a token endpoint answers to an empty code, without asking it.
      if (!code) throw new ProviderError('oauth', 'invalid_grant', 'no authorization code')
      // The state was checked by the caller against its own store before the code got here.
      const params = oauth.validateAuthResponse(as, client, new URLSearchParams({ code }), oauth.skipStateCheck)
      const verifier = o.pkce && codeVerifier ? codeVerifier : oauth.nopkce
      return token(
        () => oauth.authorizationCodeGrantRequest(as, client, auth, params, redirectUri, verifier, options(o.tokenUrl)),
        (res) => oauth.processAuthorizationCodeResponse(as, client, res, processing),
      )
    },
    refresh(refreshToken) {
      return token(
        () => oauth.refreshTokenGrantRequest(as, client, auth, refreshToken, options(o.tokenUrl)),
        (res) => oauth.processRefreshTokenResponse(as, client, res, processing),
      )
    },
    async revoke(tokens) {
      const r = o.revocation
      if (!r) return
      if (r.style === 'github-grant') {
        // Not OAuth: GitHub's REST API deletes the app's grant.
        const res = await send(r.url, () =>
          doFetch(r.url, {
            method: 'DELETE',
            headers: {
              authorization: basic(o.clientId, o.clientSecret),
              accept: 'application/vnd.github+json',
              'content-type': 'application/json',
              'user-agent': 'berth',
            },
            body: JSON.stringify({ access_token: tokens.access_token }),
            redirect: 'manual',
            signal: AbortSignal.timeout(timeoutMs),
          }),
        )
        await res.body?.cancel()
        // 404: the grant is already gone.
        if (res.status !== 204 && res.status !== 404)
          throw new ProviderError(
            'oauth',
            res.status >= 500 ? 'unavailable' : 'client',
            `grant revocation answered ${res.status}`,
            { status: res.status },
          )
        return
      }
      // RFC 7009: revoking the refresh token ends the grant; the access token too, for providers that keep them apart.
      const all: [string, string][] = [
        ['access_token', tokens.access_token],
        ...(tokens.refresh_token ? [['refresh_token', tokens.refresh_token] as [string, string]] : []),
      ]
      for (const [hint, value] of all) {
        const res = await send(r.url, () =>
          oauth.revocationRequest(as, client, auth, value, {
            ...options(r.url),
            additionalParameters: { token_type_hint: hint },
          }),
        )
        if (res.status !== 200) {
          await res.body?.cancel()
          throw new ProviderError(
            'oauth',
            res.status >= 500 ? 'unavailable' : 'client',
            `token revocation answered ${res.status}`,
            { status: res.status },
          )
        }
        await oauth.processRevocationResponse(res)
      }
    },
  }
}
