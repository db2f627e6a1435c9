/** The shapes of the fake Git provider (`startFakeGitProvider`): its options, the requests it records, the config it hands Berth, its handle. */
import type { FakeGitProviderKind, FakeGitUser } from './git-provider-shapes.js'

/** Options of `startFakeGitProvider`. */
export interface FakeGitProviderOptions {
  provider: FakeGitProviderKind
  /** The registered OAuth client (defaults: random). */
  clientId?: string
  clientSecret?: string
  /** The user who consents at the authorize endpoint (default `octo-<provider>`, id 4242). */
  user?: FakeGitUser
  /** The provider's clock in ms (default `Date.now`): share the server's manual clock to expire tokens on demand. */
  now?: () => number
  /** Access-token lifetime in seconds (default: the provider's own: 8 h GitHub, 2 h GitLab and Bitbucket). */
  accessTokenTtlSeconds?: number
  host?: string
  port?: number
}

/** One request the fake received (no secrets: token values are not kept here). */
export interface FakeProviderRequest {
  method: string
  path: string
  /** For the token endpoint: the `grant_type`. */
  grant_type?: string
  /** For authorize: whether a PKCE S256 challenge came along; for the token endpoint: whether a `code_verifier` did. */
  pkce?: boolean
  /** The HTTP status the fake answered. */
  status: number
}

/** What `createBerth({ gitProviders: { <provider>: ... } })` needs to talk to the fake. */
export interface FakeGitProviderConfig {
  clientId: string
  clientSecret: string
  authorizeUrl: string
  tokenUrl: string
  apiBaseUrl: string
  revokeUrl: string | null
}

/** A running fake provider. */
export interface FakeGitProvider {
  provider: FakeGitProviderKind
  /** Base URL, e.g. `http://127.0.0.1:43123`. */
  url: string
  clientId: string
  clientSecret: string
  /** Endpoints and client credentials for Berth's provider configuration. */
  config(): FakeGitProviderConfig
  /** Every request so far, oldest first. */
  requests: FakeProviderRequest[]
  /** The login an access token belongs to while it is valid (issued, unexpired, grant not revoked), else null. */
  tokenOwner(accessToken: string): string | null
  /** Every access and refresh token issued so far (to check none leaks anywhere). */
  issuedTokens(): string[]
  /** Grants not revoked. */
  activeGrants(): number
  /** The user revokes the app at the provider: every grant (of `login`, or everyone's) ends, tokens stop working. */
  revokeAll(login?: string): void
  /** The next consent is declined: the authorize endpoint redirects back with `error=access_denied`. */
  declineNext(): void
  /** Change who consents next. */
  setUser(user: FakeGitUser): void
  close(): Promise<void>
}
