import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Id, PageQuery, RecordMeta } from './common.js'
import { ReturnPath } from './oauth-return-path.js'

/** The hosted Git providers accounts can be connected from. */
export const GIT_PROVIDERS = ['github', 'gitlab', 'bitbucket'] as const

/** `github`, `gitlab` or `bitbucket`. */
export const GitProviderNameSchema = v.picklist(GIT_PROVIDERS, 'must be one of github, gitlab, bitbucket')

/** Whether a connected account works: `needs_reconnect` once the provider revoked or expired the grant. */
export const GitAccountStatus = v.picklist(['connected', 'needs_reconnect'])

/** A connected Git provider account as returned. Tokens are never part of it. */
export const GitAccount = v.object({
  id: Id('gitAccount'),
  provider: GitProviderNameSchema,
  /** The provider's login / username. */
  login: v.string(),
  /** Scopes the provider granted. */
  scopes: v.array(v.string()),
  status: GitAccountStatus,
  ...RecordMeta,
})

/** Path parameters of the per-provider OAuth routes. */
export const GitProviderParams = v.object({ provider: GitProviderNameSchema })

/** Query of `GET /v1/integrations/git/:provider/authorize`. */
export const GitAuthorizeQuery = v.object({ returnPath: v.optional(ReturnPath, '/') })

/** Answer of `GET /v1/integrations/git/:provider/authorize`. */
export const GitAuthorizeResponse = v.object({
  /** The provider's authorize URL (with `state`, and a PKCE challenge where supported): send the browser there. */
  url: v.string(),
})

/** Query the provider sends to the callback: `code` and `state`, or `error` when the user declined. */
export const GitCallbackQuery = v.object({
  code: v.optional(v.pipe(v.string(), minLength(1), maxLength(2048))),
  state: v.pipe(v.string(), minLength(1), maxLength(1024)),
  error: v.optional(v.pipe(v.string(), maxLength(200))),
  error_description: v.optional(v.pipe(v.string(), maxLength(2000))),
})

/** Query of `GET /v1/integrations/git/accounts`. */
export const GitAccountsQuery = v.object({ ...PageQuery, provider: v.optional(GitProviderNameSchema) })

/** The caller's connected accounts a profile's tasks get Git credentials for. */
export const GitAccountIds = v.pipe(v.array(Id('gitAccount')), maxLength(20))

export type GitAccount = v.InferOutput<typeof GitAccount>
export type GitAccountStatus = v.InferOutput<typeof GitAccountStatus>
