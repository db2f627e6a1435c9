import { validationError, newId, GitAccount, type GitAccountStatus, withResult } from '@berth/contract'
import { term } from '../records/indexes.js'
import { KeyedMutex } from '../internal/mutex.js'
import type { Cipher } from '../ports/cipher.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { GitIdentity, GitProvider, GitProviderName } from '../ports/git-provider.js'
import type { Logger } from '../ports/logger.js'
import type { OAuthTokens } from '../ports/oauth-client.js'
import { isProviderError } from '../ports/provider-error.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import { toView } from '../records/view.js'
import type { OAuthStates } from './oauth-state.js'
import type { AuditLog } from '../audit/log.js'

/** A stored Git account. Tokens are encrypted at rest and never leave the server but into task containers. */
export interface GitAccountRecord extends OwnedRecord {
  provider: GitProviderName
  login: string
  /** The provider's user id: connecting the same account again updates this record. */
  provider_user_id: string
  scopes: string[]
  status: GitAccountStatus
  access_token_encrypted: string
  refresh_token_encrypted: string | null
  /** When the access token expires (ms since the epoch), or null when it does not. */
  expires_at: number | null
}

/** Git credentials for one host, as a task's runner gets them. */
export interface GitCredential {
  /** `host[:port]` the credentials apply to. */
  host: string
  username: string
  token: string
  /** PEM certificates to trust for this host. */
  ca_pem?: string
}

/** The callback's query, as the provider sends it. */
export interface GitCallbackInput {
  code?: string | undefined
  state?: string | undefined
  error?: string | undefined
  error_description?: string | undefined
}

export interface GitAccountsOptions {
  store: Store
  clock: Clock
  cipher: Cipher
  logger: Logger
  states: OAuthStates
  providers: Partial<Record<GitProviderName, GitProvider>>
  audit?: AuditLog | undefined
}

const KIND = 'git-accounts'
/** Refresh access tokens this long before they expire (a clone must not start with a token about to lapse). */
const REFRESH_MARGIN_MS = 5 * 60_000

/**
 * 400 VALIDATION_FAILED (naming `<field>.<index>`) unless every id is one of the caller's
 * connected Git accounts.
 *
 * @example
 * ```ts
 * await assertOwnGitAccounts(store, caller.id, body.git_account_ids ?? [])
 * ```
 */
export async function assertOwnGitAccounts(
  store: Store,
  owner: string,
  ids: string[],
  field = 'git_account_ids',
): Promise<void> {
  const found = await store.getMany(ids.map((id) => `${KIND}:${owner}:${id}`))
  const issues = ids.flatMap((id, i) =>
    found[i] === null
      ? [{ location: 'body' as const, path: `${field}.${i}`, message: `git account ${id} does not exist` }]
      : [],
  )
  if (issues.length) throw validationError(issues)
}

/**
 * Connected Git provider accounts: the OAuth flow (authorize URL with a signed single-use
 * state and PKCE, callback with code exchange and the account's identity), the list,
 * disconnect (revoking at the provider, best effort), and fresh credentials for tasks
 * (refreshing expired access tokens; a revoked grant marks the account `needs_reconnect`).
 *
 * @example
 * ```ts
 * const { url } = await gitAccounts.authorize(caller.id, 'github', '/settings/git', 'https://berth.example.com')
 * // the browser goes to `url`; the provider sends it back to the callback:
 * const location = await gitAccounts.callback('github', { code, state }, null) // '/settings/git?git=connected&...'
 * ```
 */
export class GitAccountsService {
  readonly records: OwnedCollection<GitAccountRecord>
  private readonly refreshLock = new KeyedMutex()
  private readonly connectLock = new KeyedMutex()

  constructor(private readonly o: GitAccountsOptions) {
    this.records = new OwnedCollection<GitAccountRecord>(o.store, KIND, 'git account')
  }

  view(r: GitAccountRecord): GitAccount {
    return toView(GitAccount, r)
  }

  /** The configured provider; 400 naming `provider` when this server has no client for it. */
  private provider(name: GitProviderName): GitProvider {
    const p = this.o.providers[name]
    if (!p)
      throw validationError([
        { location: 'params', path: 'provider', message: `${name} is not configured on this server` },
      ])
    return p
  }

  /** The provider's authorize URL for the caller, carrying a fresh state bound to caller, provider and return path. */
  async authorize(owner: string, name: GitProviderName, returnPath: string, origin: string): Promise<{ url: string }> {
    const p = this.provider(name)
    const redirectUri = p.redirectUri ?? `${origin}/v1/integrations/git/${name}/callback`
    const { state, codeChallenge } = await this.o.states.issue({
      owner,
      flow: `git:${name}`,
      returnPath,
      redirectUri,
      pkce: p.oauth.pkce,
    })
    return { url: p.oauth.authorizeUrl({ state, redirectUri, codeChallenge }) }
  }

  /**
   * Finish the flow and answer where to send the browser. A bad `state` (forged, replayed,
   * expired, another provider's, another caller's) is a 400 and nothing is stored. With a
   * good state every outcome goes back to its return path: `?git=connected&provider=…&account=…`,
   * or `?git=error&provider=…&reason=…` (`access_denied` or the provider's own error code
   * when the user declined, `invalid_code`, `provider_rejected_client`, `provider_unavailable`).
   */
  async callback(name: GitProviderName, query: GitCallbackInput, presentingCaller: string | null): Promise<string> {
    const p = this.provider(name)
    if (query.state === undefined)
      throw validationError([{ location: 'query', path: 'state', message: 'state is required' }])
    if (query.code === undefined && query.error === undefined)
      throw validationError([{ location: 'query', path: 'code', message: 'code is required' }])
    const st = await this.o.states.consume(query.state, { flow: `git:${name}`, caller: presentingCaller })
    const fail = (reason: string) => withResult(st.return_path, { git: 'error', provider: name, reason })
    if (query.error !== undefined) return fail(/^[a-z0-9_]{1,64}$/.test(query.error) ? query.error : 'provider_error')
    let tokens: OAuthTokens
    let identity: GitIdentity
    try {
      tokens = await p.oauth.exchangeCode({
        code: query.code!,
        redirectUri: st.redirect_uri,
        codeVerifier: st.code_verifier,
      })
      identity = await p.identity(tokens.access_token)
    } catch (err) {
      const reason = !isProviderError(err, 'oauth')
        ? 'provider_unavailable'
        : err.kind === 'invalid_grant'
          ? 'invalid_code'
          : err.kind === 'client'
            ? 'provider_rejected_client'
            : 'provider_unavailable'
      this.o.logger.warn('git account connection failed', {
        provider: name,
        reason,
        error: err instanceof Error ? err.message : String(err),
      })
      return fail(reason)
    }
    const account = await this.connect(st.owner, name, tokens, identity)
    return withResult(st.return_path, { git: 'connected', provider: name, account: account.id })
  }

  /**
   * Store an account from tokens and the identity they belong to. Connecting the same
   * provider account again (a reconnect) updates the existing record and its status.
   */
  async connect(
    owner: string,
    name: GitProviderName,
    tokens: OAuthTokens,
    identity: GitIdentity,
  ): Promise<GitAccountRecord> {
    return this.connectLock.run(owner, async () => {
      const existing = (await this.records.all(owner)).find(
        (r) => r.provider === name && r.provider_user_id === identity.id,
      )
      const now = isoNow(this.o.clock)
      const record: GitAccountRecord = {
        id: existing?.id ?? newId('gitAccount'),
        owner_id: owner,
        provider: name,
        login: identity.login.slice(0, 200),
        provider_user_id: identity.id.slice(0, 200),
        scopes: tokens.scopes.slice(0, 100).map((s) => s.slice(0, 200)),
        status: 'connected',
        access_token_encrypted: this.o.cipher.encrypt(tokens.access_token),
        refresh_token_encrypted: tokens.refresh_token ? this.o.cipher.encrypt(tokens.refresh_token) : null,
        expires_at: tokens.expires_at,
        created_at: existing?.created_at ?? now,
        updated_at: now,
      }
      await this.records.put(record)
      // The OAuth callback is a public route: the account's owner is who connected it.
      await this.o.audit?.record({
        action: 'git_account.connected',
        target: { type: 'git_account', id: record.id },
        details: { provider: name },
        actor: { type: 'user', id: owner },
      })
      return record
    })
  }

  async get(owner: string, id: string): Promise<GitAccount> {
    return this.view(await this.records.get(owner, id))
  }

  async list(
    owner: string,
    page: Page,
    filter: { provider?: GitProviderName | undefined } = {},
  ): Promise<Paged<GitAccount>> {
    const { items, total, next } = await this.records.list(owner, page, term({ provider: filter.provider }))
    return { items: items.map((r) => this.view(r)), total, next }
  }

  /** Disconnect: delete the account (404 when absent), then revoke the grant at the provider, best effort. */
  async remove(owner: string, id: string): Promise<void> {
    const r = await this.records.remove(owner, id)
    await this.o.audit?.record({ action: 'git_account.disconnected', target: { type: 'git_account', id }, owner })
    const p = this.o.providers[r.provider]
    if (!p) return
    try {
      await p.oauth.revoke({
        access_token: this.o.cipher.decrypt(r.access_token_encrypted),
        refresh_token: r.refresh_token_encrypted ? this.o.cipher.decrypt(r.refresh_token_encrypted) : null,
      })
    } catch (err) {
      this.o.logger.warn('could not revoke a git account at its provider', {
        provider: r.provider,
        account: id,
        error: err instanceof Error ? err.message : String(err),
      })
    }
  }

  /**
   * A usable access token for the account: the stored one, or — when it has expired or is
   * about to — a new one from the refresh token. Null when the account cannot be used: its
   * grant was revoked (the account is then marked `needs_reconnect`), or the provider is
   * unreachable and the stored token has lapsed.
   */
  async accessToken(owner: string, id: string): Promise<string | null> {
    const r = await this.records.find(owner, id)
    if (r?.status !== 'connected') return null
    if (!this.expiring(r)) return this.o.cipher.decrypt(r.access_token_encrypted)
    // One refresh per account at a time: providers rotate refresh tokens, so a second
    // concurrent refresh with the old one would be refused (and look like a revocation).
    return this.refreshLock.run(r.id, async () => {
      const cur = await this.records.find(owner, id)
      if (cur?.status !== 'connected') return null
      if (!this.expiring(cur)) return this.o.cipher.decrypt(cur.access_token_encrypted)
      const p = this.o.providers[cur.provider]
      if (!p) return null
      if (!cur.refresh_token_encrypted) {
        if (cur.expires_at! > this.o.clock.now()) return this.o.cipher.decrypt(cur.access_token_encrypted)
        await this.markNeedsReconnect(cur)
        return null
      }
      try {
        const tokens = await p.oauth.refresh(this.o.cipher.decrypt(cur.refresh_token_encrypted))
        await this.records.put({
          ...cur,
          access_token_encrypted: this.o.cipher.encrypt(tokens.access_token),
          // Some providers (Bitbucket) keep the refresh token; others rotate it.
          refresh_token_encrypted: tokens.refresh_token
            ? this.o.cipher.encrypt(tokens.refresh_token)
            : cur.refresh_token_encrypted,
          expires_at: tokens.expires_at,
          scopes: tokens.scopes.length ? tokens.scopes.slice(0, 100) : cur.scopes,
          updated_at: isoNow(this.o.clock),
        })
        return tokens.access_token
      } catch (err) {
        if (isProviderError(err, 'oauth') && err.kind === 'invalid_grant') {
          await this.markNeedsReconnect(cur)
          return null
        }
        this.o.logger.warn('could not refresh a git account token', {
          provider: cur.provider,
          account: cur.id,
          error: err instanceof Error ? err.message : String(err),
        })
        return cur.expires_at! > this.o.clock.now() ? this.o.cipher.decrypt(cur.access_token_encrypted) : null
      }
    })
  }

  /**
   * Credentials for a task of a profile linked to these accounts: one entry per usable
   * account (accounts deleted, needing reconnection or of a provider no longer configured
   * are left out, with a warning).
   */
  async credentials(owner: string, ids: readonly string[]): Promise<GitCredential[]> {
    const out: GitCredential[] = []
    for (const id of new Set(ids)) {
      const r = await this.records.find(owner, id)
      const p = r && this.o.providers[r.provider]
      const token = p ? await this.accessToken(owner, id) : null
      if (!r || !p || !token) {
        this.o.logger.warn('a linked git account is not usable; the task runs without its credentials', {
          account: id,
          status: r?.status ?? 'deleted',
        })
        continue
      }
      out.push({ host: p.gitHost, username: p.gitUsername, token, ca_pem: p.gitCaCert })
    }
    return out
  }

  private expiring(r: GitAccountRecord): boolean {
    return r.expires_at !== null && r.expires_at - REFRESH_MARGIN_MS <= this.o.clock.now()
  }

  private async markNeedsReconnect(r: GitAccountRecord): Promise<void> {
    this.o.logger.warn('a git account grant was revoked or expired; it needs reconnecting', {
      provider: r.provider,
      account: r.id,
    })
    await this.records.put({ ...r, status: 'needs_reconnect', updated_at: isoNow(this.o.clock) })
  }
}
