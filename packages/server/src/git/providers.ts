import { ProviderError, type Clock, type GitIdentity, type GitProvider, type GitProviderName } from '@berth/core'
import { createFetchOAuthClient, type OAuthRevocation } from '../oauth/fetch-client.js'

/**
 * One Git provider's OAuth client registration and endpoints (`createBerth({ gitProviders })`).
 * Only `clientId` and `clientSecret` are required: the rest defaults to the public host
 * (github.com, gitlab.com, bitbucket.org). Point the URLs elsewhere for a self-hosted
 * instance (GitHub Enterprise, a GitLab of your own) or a local fake in tests.
 */
export interface GitProviderConfig {
  clientId: string
  clientSecret: string
  /** The provider's consent page, e.g. `https://github.com/login/oauth/authorize`. */
  authorizeUrl?: string
  /** The token endpoint, e.g. `https://github.com/login/oauth/access_token`. */
  tokenUrl?: string
  /** The REST API base (the user is read from `<apiBaseUrl>/user`), e.g. `https://api.github.com`. */
  apiBaseUrl?: string
  /** Where grants are revoked on disconnect; `null`: nowhere (Bitbucket has no revocation endpoint). */
  revokeUrl?: string | null
  /** Scopes to request. */
  scopes?: string[]
  /** Send a PKCE S256 challenge (default: on for GitHub and GitLab, off for Bitbucket, which does not support it). */
  pkce?: boolean
  /** `host[:port]` of the Git HTTPS endpoint task credentials apply to, e.g. `github.com`. */
  gitHost?: string
  /** HTTPS username paired with the token (defaults: `x-access-token`, `oauth2`, `x-token-auth`). */
  gitUsername?: string
  /** PEM certificates task containers trust for `gitHost` (a private CA). */
  gitCaCert?: string
  /** The OAuth redirect URI registered with the provider; default: derived from the authorize request's origin. Set it behind a proxy. */
  redirectUri?: string
}

/** Git providers by name; providers left out cannot be connected. */
export type GitProvidersConfig = Partial<Record<GitProviderName, GitProviderConfig>>

interface Preset {
  authorizeUrl: string
  tokenUrl: string
  apiBaseUrl: string
  revocation: (c: {
    apiBaseUrl: string
    clientId: string
    revokeUrl: string | null | undefined
  }) => OAuthRevocation | null
  scopes: string[]
  pkce: boolean
  clientAuth: 'basic' | 'body'
  gitHost: string
  gitUsername: string
  /** The user from `GET <apiBaseUrl>/user`. */
  identity: (body: Record<string, unknown>) => { id: unknown; login: unknown }
  apiHeaders: Record<string, string>
}

/** The public hosts' endpoints and conventions. */
export const GIT_PROVIDER_PRESETS: Record<GitProviderName, Preset> = {
  github: {
    authorizeUrl: 'https://github.com/login/oauth/authorize',
    tokenUrl: 'https://github.com/login/oauth/access_token',
    apiBaseUrl: 'https://api.github.com',
    revocation: ({ apiBaseUrl, clientId, revokeUrl }) =>
      revokeUrl === null
        ? null
        : {
            style: 'github-grant',
            url: revokeUrl ?? `${apiBaseUrl}/applications/${encodeURIComponent(clientId)}/grant`,
          },
    scopes: ['repo', 'read:user'],
    pkce: true,
    clientAuth: 'body',
    gitHost: 'github.com',
    gitUsername: 'x-access-token',
    identity: (b) => ({ id: b.id, login: b.login }),
    apiHeaders: { accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' },
  },
  gitlab: {
    authorizeUrl: 'https://gitlab.com/oauth/authorize',
    tokenUrl: 'https://gitlab.com/oauth/token',
    apiBaseUrl: 'https://gitlab.com/api/v4',
    revocation: ({ revokeUrl }) =>
      revokeUrl === null ? null : { style: 'rfc7009', url: revokeUrl ?? 'https://gitlab.com/oauth/revoke' },
    scopes: ['read_user', 'read_repository', 'write_repository'],
    pkce: true,
    clientAuth: 'body',
    gitHost: 'gitlab.com',
    gitUsername: 'oauth2',
    identity: (b) => ({ id: b.id, login: b.username }),
    apiHeaders: { accept: 'application/json' },
  },
  bitbucket: {
    authorizeUrl: 'https://bitbucket.org/site/oauth2/authorize',
    tokenUrl: 'https://bitbucket.org/site/oauth2/access_token',
    apiBaseUrl: 'https://api.bitbucket.org/2.0',
    revocation: ({ revokeUrl }) => (revokeUrl ? { style: 'rfc7009', url: revokeUrl } : null),
    // Bitbucket grants the scopes set on the OAuth consumer; none are requested.
    scopes: [],
    pkce: false,
    clientAuth: 'basic',
    gitHost: 'bitbucket.org',
    gitUsername: 'x-token-auth',
    identity: (b) => ({ id: b.account_id ?? b.uuid, login: b.username ?? b.nickname }),
    apiHeaders: { accept: 'application/json' },
  },
}

/**
 * The configured Git providers as core's `GitProvider` ports: a generic OAuth 2 client per
 * provider and its user API, over `fetch`.
 *
 * @example
 * ```ts
 * const providers = createGitProviders({ github: { clientId: 'Iv1.abc', clientSecret: process.env.GITHUB_SECRET! } })
 * createServices({ store, cipher, gitProviders: providers })
 * ```
 */
export function createGitProviders(
  config: GitProvidersConfig,
  opts: { clock?: Clock; fetch?: typeof fetch } = {},
): Partial<Record<GitProviderName, GitProvider>> {
  const out: Partial<Record<GitProviderName, GitProvider>> = {}
  const doFetch = opts.fetch ?? fetch
  for (const [name, c] of Object.entries(config) as [GitProviderName, GitProviderConfig | undefined][]) {
    if (!c) continue
    const preset = GIT_PROVIDER_PRESETS[name]
    if (!preset) throw new Error(`gitProviders: unknown provider "${name}" (known: github, gitlab, bitbucket)`)
    if (!c.clientId || !c.clientSecret) throw new Error(`gitProviders.${name}: clientId and clientSecret are required`)
    const apiBaseUrl = (c.apiBaseUrl ?? preset.apiBaseUrl).replace(/\/+$/, '')
    const oauth = createFetchOAuthClient({
      clientId: c.clientId,
      clientSecret: c.clientSecret,
      authorizeUrl: c.authorizeUrl ?? preset.authorizeUrl,
      tokenUrl: c.tokenUrl ?? preset.tokenUrl,
      revocation: preset.revocation({ apiBaseUrl, clientId: c.clientId, revokeUrl: c.revokeUrl }),
      scopes: c.scopes ?? preset.scopes,
      clientAuth: preset.clientAuth,
      pkce: c.pkce ?? preset.pkce,
      fetch: doFetch,
      clock: opts.clock,
    })
    out[name] = {
      name,
      oauth,
      identity: (token) => fetchIdentity(doFetch, `${apiBaseUrl}/user`, token, preset),
      gitHost: c.gitHost ?? preset.gitHost,
      gitUsername: c.gitUsername ?? preset.gitUsername,
      gitCaCert: c.gitCaCert,
      redirectUri: c.redirectUri,
    }
  }
  return out
}

async function fetchIdentity(doFetch: typeof fetch, url: string, token: string, preset: Preset): Promise<GitIdentity> {
  let res: Response
  try {
    res = await doFetch(url, {
      headers: { ...preset.apiHeaders, authorization: `Bearer ${token}`, 'user-agent': 'berth' },
      redirect: 'manual',
      signal: AbortSignal.timeout(10_000),
    })
  } catch (err) {
    throw new ProviderError(
      'oauth',
      'unavailable',
      `could not reach ${new URL(url).host}: ${err instanceof Error ? err.message : String(err)}`,
    )
  }
  const body = (await res.json().catch(() => null)) as Record<string, unknown> | null
  if (res.status === 401 || res.status === 403)
    throw new ProviderError('oauth', 'unauthorized', `the provider refused the token (${res.status})`, {
      status: res.status,
    })
  if (!res.ok || !body || typeof body !== 'object')
    throw new ProviderError('oauth', 'unavailable', `the user API answered ${res.status}`, { status: res.status })
  const { id, login } = preset.identity(body)
  if ((typeof id !== 'string' && typeof id !== 'number') || typeof login !== 'string' || !login) {
    throw new ProviderError('oauth', 'unavailable', 'the user API answered without an id and login')
  }
  return { id: String(id), login }
}
