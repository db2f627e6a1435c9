/**
 * How each hosted Git provider's OAuth 2 server and user API look on the wire: paths,
 * client authentication, token and error bodies. One fake serves all three from these.
 */

/** The providers the fake can be. */
export type FakeGitProviderKind = 'github' | 'gitlab' | 'bitbucket'

/** A user of the fake provider. */
export interface FakeGitUser {
  login: string
  id: number
}

/** A token-endpoint answer. */
export interface WireAnswer {
  status: number
  body: Record<string, unknown>
}

/** Why the token endpoint refuses. */
export type TokenErrorKind =
  | 'bad_code'
  | 'bad_refresh'
  | 'bad_client'
  | 'bad_pkce'
  | 'bad_request'
  | 'unsupported_grant'

export interface ProviderShape {
  authorizePath: string
  tokenPath: string
  /** Prefix of the REST API: the user is at `<apiPrefix>/user`. */
  apiPrefix: string
  /** How grants are revoked, or null (no endpoint). `:client_id` is filled in. */
  revoke: { method: 'DELETE' | 'POST'; path: string } | null
  /** Client credentials the token endpoint accepts. */
  clientAuth: ('body' | 'basic')[]
  /** Whether PKCE is verified (otherwise a challenge is ignored). */
  pkce: boolean
  /** Access-token lifetime in seconds. */
  accessTtl: number
  /** Whether refreshing issues a new refresh token (and retires the old one). */
  rotatesRefreshToken: boolean
  /** Scopes granted (the fake grants what is asked for, or these when nothing is). */
  defaultScopes: string[]
  newAccessToken(random: string): string
  newRefreshToken(random: string): string
  tokenBody(t: { access: string; refresh: string; ttl: number; scopes: string[] }): Record<string, unknown>
  tokenError(kind: TokenErrorKind): WireAnswer
  /** The body of `GET <apiPrefix>/user`. */
  userBody(u: FakeGitUser): Record<string, unknown>
  /** The API's 401 body. */
  unauthorizedBody(expired: boolean): Record<string, unknown>
}

const GITLAB_INVALID_GRANT =
  'The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.'

/** The three providers' shapes, as documented by each (GitHub answers token errors with a 200). */
export const PROVIDER_SHAPES: Record<FakeGitProviderKind, ProviderShape> = {
  github: {
    authorizePath: '/login/oauth/authorize',
    tokenPath: '/login/oauth/access_token',
    apiPrefix: '/api/v3',
    revoke: { method: 'DELETE', path: '/api/v3/applications/:client_id/grant' },
    clientAuth: ['body'],
    pkce: true,
    accessTtl: 28_800,
    rotatesRefreshToken: true,
    defaultScopes: ['repo'],
    newAccessToken: (r) => `ghu_${r}`,
    newRefreshToken: (r) => `ghr_${r}`,
    tokenBody: ({ access, refresh, ttl, scopes }) => ({
      access_token: access,
      expires_in: ttl,
      refresh_token: refresh,
      refresh_token_expires_in: 15_897_600,
      scope: scopes.join(','),
      token_type: 'bearer',
    }),
    tokenError: (kind) => {
      const [error, description] = {
        bad_code: ['bad_verification_code', 'The code passed is incorrect or expired.'],
        bad_pkce: ['bad_verification_code', 'The code_verifier does not match the code_challenge.'],
        bad_refresh: ['bad_refresh_token', 'The refresh token passed is incorrect or expired.'],
        bad_client: ['incorrect_client_credentials', 'The client_id and/or client_secret passed are incorrect.'],
        bad_request: [
          'redirect_uri_mismatch',
          'The redirect_uri MUST match the registered callback URL for this application.',
        ],
        unsupported_grant: ['unsupported_grant_type', 'The grant type is not supported.'],
      }[kind]
      return {
        status: 200,
        body: {
          error,
          error_description: description,
          error_uri:
            'https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors',
        },
      }
    },
    userBody: (u) => ({
      login: u.login,
      id: u.id,
      node_id: `U_${u.id}`,
      type: 'User',
      name: u.login,
      site_admin: false,
    }),
    unauthorizedBody: () => ({
      message: 'Bad credentials',
      documentation_url: 'https://docs.github.com/rest',
      status: '401',
    }),
  },
  gitlab: {
    authorizePath: '/oauth/authorize',
    tokenPath: '/oauth/token',
    apiPrefix: '/api/v4',
    revoke: { method: 'POST', path: '/oauth/revoke' },
    clientAuth: ['body', 'basic'],
    pkce: true,
    accessTtl: 7200,
    rotatesRefreshToken: true,
    defaultScopes: ['api'],
    newAccessToken: (r) => `glo_${r}`,
    newRefreshToken: (r) => `glr_${r}`,
    tokenBody: ({ access, refresh, ttl, scopes }) => ({
      access_token: access,
      token_type: 'Bearer',
      expires_in: ttl,
      refresh_token: refresh,
      scope: scopes.join(' '),
      created_at: Math.floor(Date.now() / 1000),
    }),
    tokenError: (kind) =>
      kind === 'bad_client'
        ? {
            status: 401,
            body: {
              error: 'invalid_client',
              error_description:
                'Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method.',
            },
          }
        : kind === 'unsupported_grant'
          ? {
              status: 400,
              body: {
                error: 'unsupported_grant_type',
                error_description: 'The authorization grant type is not supported by the authorization server.',
              },
            }
          : kind === 'bad_request'
            ? {
                status: 400,
                body: { error: 'invalid_request', error_description: 'The request is missing a required parameter.' },
              }
            : { status: 400, body: { error: 'invalid_grant', error_description: GITLAB_INVALID_GRANT } },
    userBody: (u) => ({
      id: u.id,
      username: u.login,
      name: u.login,
      state: 'active',
      web_url: `https://gitlab.example/${u.login}`,
    }),
    unauthorizedBody: (expired) =>
      expired
        ? {
            error: 'invalid_token',
            error_description: 'Token is expired. You can either do re-authorization or token refresh.',
          }
        : { message: '401 Unauthorized' },
  },
  bitbucket: {
    authorizePath: '/site/oauth2/authorize',
    tokenPath: '/site/oauth2/access_token',
    apiPrefix: '/2.0',
    revoke: null,
    clientAuth: ['basic'],
    pkce: false,
    accessTtl: 7200,
    rotatesRefreshToken: false,
    defaultScopes: ['repository', 'account'],
    newAccessToken: (r) => `bbat_${r}`,
    newRefreshToken: (r) => `bbrt_${r}`,
    tokenBody: ({ access, refresh, ttl, scopes }) => ({
      access_token: access,
      scopes: scopes.join(' '),
      expires_in: ttl,
      refresh_token: refresh,
      token_type: 'bearer',
      state: 'authorization_code',
    }),
    tokenError: (kind) =>
      kind === 'bad_client'
        ? { status: 401, body: { error: 'invalid_client', error_description: 'Invalid OAuth client credentials' } }
        : kind === 'unsupported_grant'
          ? { status: 400, body: { error: 'unsupported_grant_type', error_description: 'Unsupported grant type' } }
          : kind === 'bad_request'
            ? { status: 400, body: { error: 'invalid_request', error_description: 'redirect_uri does not match' } }
            : {
                status: 400,
                body: {
                  error: 'invalid_grant',
                  error_description:
                    kind === 'bad_refresh' ? 'Invalid refresh_token' : 'The specified code is not valid.',
                },
              },
    userBody: (u) => ({
      type: 'user',
      username: u.login,
      nickname: u.login,
      display_name: u.login,
      account_id: `557058:${u.id}`,
      uuid: `{${u.id.toString(16).padStart(8, '0')}-0000-4000-8000-000000000000}`,
    }),
    unauthorizedBody: (expired) => ({
      type: 'error',
      error: { message: expired ? 'Access token expired.' : 'Token is invalid or not supported for this endpoint.' },
    }),
  },
}
