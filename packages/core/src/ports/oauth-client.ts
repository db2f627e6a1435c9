/**
 * The OAuth 2 client port: what Berth needs from a provider's authorization server
 * (authorization-code grant with PKCE, refresh, revocation). The server implements it with
 * `fetch` against configurable URLs; tests point those at local fakes.
 */

import type { ProviderError, ProviderErrorKinds } from './provider-error.js'

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

/** Why an OAuth call failed: see {@link ProviderErrorKinds}. */
export type OAuthErrorKind = ProviderErrorKinds['oauth']

/** The authorization-code grant of one provider, for one registered client. */
export interface OAuthClient {
  /** Whether the provider verifies PKCE (S256); when false, no challenge is sent. */
  readonly pkce: boolean
  /** The provider URL to send the user to for consent. */
  authorizeUrl(req: { state: string; redirectUri: string; codeChallenge: string | null }): string
  /** Exchange an authorization code for tokens. Throws {@link ProviderError}. */
  exchangeCode(req: { code: string; redirectUri: string; codeVerifier: string | null }): Promise<OAuthTokens>
  /** New tokens from a refresh token. Throws {@link ProviderError} (`invalid_grant` when revoked). */
  refresh(refreshToken: string): Promise<OAuthTokens>
  /** Revoke the grant at the provider; a no-op where the provider has no revocation. Throws {@link ProviderError}. */
  revoke(tokens: { access_token: string; refresh_token: string | null }): Promise<void>
}
