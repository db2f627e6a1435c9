import { GIT_PROVIDERS } from '@berth/contract'
import type { OAuthClient } from './oauth-client.js'

export { GIT_PROVIDERS }

/** `github`, `gitlab` or `bitbucket`. */
export type GitProviderName = (typeof GIT_PROVIDERS)[number]

/** The provider's user a token belongs to. */
export interface GitIdentity {
  /** The provider's stable user id (kept to recognise a reconnect of the same account). */
  id: string
  /** The login / username shown to the caller. */
  login: string
}

/**
 * One configured Git provider: its OAuth client, its user API and how its Git host takes
 * the token over HTTPS. Built by the server from `createBerth({ gitProviders })`.
 */
export interface GitProvider {
  name: GitProviderName
  oauth: OAuthClient
  /** The user a token belongs to. Throws a `ProviderError` of `oauth` (`unauthorized` for a refused token). */
  identity(accessToken: string): Promise<GitIdentity>
  /** `host[:port]` of the provider's Git HTTPS endpoint (where task credentials apply), e.g. `github.com`. */
  gitHost: string
  /** The HTTPS username to pair with the token, e.g. `x-access-token` (GitHub), `oauth2` (GitLab). */
  gitUsername: string
  /** PEM certificates task containers trust for `gitHost` (self-hosted instances with a private CA). */
  gitCaCert?: string | undefined
  /** A fixed OAuth redirect URI; default: this server's `/v1/integrations/git/<provider>/callback` on the authorize request's origin. */
  redirectUri?: string | undefined
}
