/**
 * The OAuth 2 client port: what Berth needs from a provider's authorization server
 * (authorization-code grant with PKCE, refresh, revocation). The server implements it with
 * `fetch` against configurable URLs; tests point those at local fakes.
 */

/** Tokens from a token endpoint, normalised across providers. */
export interface OAuthTokens {
  access_token: string
  /** Null when the provider issues none (tokens that never expire). */
  refresh_token: string | null
  /** When the access token expires (ms since the epoch, by the caller's clock), or null. */
  expires_at: number | null
  /** Granted scopes, as the provider reported them (empty when it does not say). */
  scopes: string[]
}

/**
 * Why an OAuth call failed:
 * - `invalid_grant`: the code or refresh token is invalid, expired or revoked (the user
 *   has to authorize again);
 * - `unauthorized`: an API call was refused for the access token (401);
 * - `client`: the provider refused Berth's client credentials or request (a deployment
 *   misconfiguration);
 * - `unavailable`: the provider could not be reached or answered something unusable.
 */
export type OAuthErrorKind = 'invalid_grant' | 'unauthorized' | 'client' | 'unavailable'

/**
 * A failed OAuth or provider API call. `code` is the provider's own error code when it sent
 * one (e.g. `bad_verification_code`), for logs; never shown to callers verbatim.
 *
 * @example
 * ```ts
 * throw new OAuthError('invalid_grant', 'refresh token revoked', { code: 'invalid_grant', status: 400 })
 * ```
 */
export class OAuthError extends Error {
  readonly kind: OAuthErrorKind
  readonly code: string | undefined
  readonly status: number | undefined

  constructor(kind: OAuthErrorKind, message: string, extra: { code?: string | undefined; status?: number | undefined } = {}) {
    super(message)
    this.name = 'OAuthError'
    this.kind = kind
    this.code = extra.code
    this.status = extra.status
  }
}

/**
 * True for an {@link OAuthError} (also across module copies).
 *
 * @example
 * ```ts
 * try { await client.refresh(rt) } catch (err) { if (isOAuthError(err) && err.kind === 'invalid_grant') markNeedsReconnect() }
 * ```
 */
export function isOAuthError(value: unknown): value is OAuthError {
  return value instanceof OAuthError || (typeof value === 'object' && value !== null && (value as { name?: unknown }).name === 'OAuthError')
}

/** The authorization-code grant of one provider, for one registered client. */
export interface OAuthClient {
  /** Whether the provider verifies PKCE (S256); when false, no challenge is sent. */
  readonly pkce: boolean
  /** The provider URL to send the user to for consent. */
  authorizeUrl(req: { state: string; redirectUri: string; codeChallenge: string | null }): string
  /** Exchange an authorization code for tokens. Throws {@link OAuthError}. */
  exchangeCode(req: { code: string; redirectUri: string; codeVerifier: string | null }): Promise<OAuthTokens>
  /** New tokens from a refresh token. Throws {@link OAuthError} (`invalid_grant` when revoked). */
  refresh(refreshToken: string): Promise<OAuthTokens>
  /** Revoke the grant at the provider; a no-op where the provider has no revocation. Throws {@link OAuthError}. */
  revoke(tokens: { access_token: string; refresh_token: string | null }): Promise<void>
}
