import { defineRoute } from '../route.js'
import { IdParams, ListOf } from '../schemas/common.js'
import {
  GitAccount,
  GitAccountsQuery,
  GitAuthorizeQuery,
  GitAuthorizeResponse,
  GitCallbackQuery,
  GitProviderParams,
} from '../schemas/git-account.js'

export const gitAuthorize = defineRoute({
  name: 'git.authorize',
  method: 'GET',
  path: '/v1/integrations/git/:provider/authorize',
  auth: 'caller',
  tag: 'git accounts',
  summary: 'Begin connecting a Git provider account (OAuth)',
  description:
    "Answers `{ url }`: the provider's authorize URL, carrying a `state` that is signed, expires after 10 minutes, works once and is bound to you, the provider and `returnPath` (and a PKCE S256 challenge where the provider supports it: GitHub, GitLab). " +
    'It answers JSON rather than redirecting because this route needs your bearer key, which a browser navigation cannot send: fetch it, then send the browser to `url`. ' +
    'After consent the provider sends the browser to `GET /v1/integrations/git/:provider/callback`, which redirects to `returnPath`. ' +
    '`returnPath` (default `/`) must be a local path: one leading `/`, no `//`, scheme, backslash, whitespace or control characters. ' +
    '`provider`: `github`, `gitlab` or `bitbucket`; one this server has no OAuth client for is a 400.',
  params: GitProviderParams,
  query: GitAuthorizeQuery,
  response: GitAuthorizeResponse,
})

export const gitCallback = defineRoute({
  name: 'git.callback',
  method: 'GET',
  path: '/v1/integrations/git/:provider/callback',
  // The provider sends the browser here without Berth credentials: the caller is the one
  // the signed `state` was issued to.
  auth: 'public',
  tag: 'git accounts',
  summary: 'OAuth return URL: store the connected account and redirect back',
  description:
    'The URL the provider redirects the browser to after consent; no credentials needed: the caller is the one the signed `state` was issued to. ' +
    'A state that is malformed, forged, already used, expired, issued for another provider or — when the request carries a caller key — issued to another caller is a 400 VALIDATION_FAILED and nothing is stored. ' +
    "Otherwise the code is exchanged (with the PKCE verifier), the account's login is read from the provider, the account is stored (tokens encrypted, never returned), and the answer is a 302 to the flow's `returnPath` with `git=connected&provider=<p>&account=<git_id>`, " +
    'or `git=error&provider=<p>&reason=<reason>` (`access_denied` when the user declined, `invalid_code`, `provider_rejected_client`, `provider_unavailable`).',
  params: GitProviderParams,
  query: GitCallbackQuery,
  status: 302,
})

export const listGitAccounts = defineRoute({
  name: 'git.accounts.list',
  method: 'GET',
  path: '/v1/integrations/git/accounts',
  auth: 'caller',
  tag: 'git accounts',
  summary: 'List your connected Git provider accounts',
  description:
    'Each with `provider`, `login`, granted `scopes` and `status` (`connected`, or `needs_reconnect` once the provider revoked the grant: authorize again). Tokens are never returned.',
  query: GitAccountsQuery,
  response: ListOf('accounts', GitAccount),
})

export const getGitAccount = defineRoute({
  name: 'git.accounts.get',
  method: 'GET',
  path: '/v1/integrations/git/accounts/:id',
  auth: 'caller',
  tag: 'git accounts',
  summary: 'Read one connected Git provider account',
  params: IdParams('gitAccount'),
  response: GitAccount,
})

export const deleteGitAccount = defineRoute({
  name: 'git.accounts.delete',
  method: 'DELETE',
  path: '/v1/integrations/git/accounts/:id',
  auth: 'caller',
  tag: 'git accounts',
  summary: 'Disconnect a Git provider account',
  description:
    'Deletes the account and its tokens, and revokes the grant at the provider (best effort: a provider that cannot be reached does not keep the account). Profiles that list it simply stop getting its credentials.',
  params: IdParams('gitAccount'),
  status: 204,
})

/** The Git provider account routes. */
export const gitAccountRoutes = [gitAuthorize, gitCallback, listGitAccounts, getGitAccount, deleteGitAccount] as const
