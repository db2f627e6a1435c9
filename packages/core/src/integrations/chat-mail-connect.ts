/** The OAuth connect flow of the chat and mail integrations: authorize, callback, reconnect, disconnect. */
import { ApiError, validationError, newId, type ConnectType, withResult } from '@berth/contract'
import { KeyedMutex } from '../internal/mutex.js'
import type { Cipher } from '../ports/cipher.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { OAuthTokens } from '../ports/oauth-client.js'
import { isProviderError } from '../ports/provider-error.js'
import type { Store } from '../ports/store.js'
import { ConnectTokens } from './chat-mail-tokens.js'
import { isConnectType, message, notConfigured, TYPES, type Config, type ConnectProvider } from './chat-mail-types.js'
import { openConfig, sealConfig } from './integration-config.js'
import type { IntegrationRecord, IntegrationsService } from './integrations.js'
import type { OAuthStates } from './oauth-state.js'

/** Query the provider sends to a callback. */
export interface ConnectCallbackInput {
  code?: string | undefined
  state?: string | undefined
  error?: string | undefined
}

export interface ChatMailConnectOptions {
  store: Store
  clock: Clock
  cipher: Cipher
  logger: Logger
  states: OAuthStates
  integrations: IntegrationsService
  providers: Partial<Record<ConnectType, ConnectProvider>>
}

/** Team ids become part of store keys. */
const KEY_RE = /^[A-Za-z0-9_.@+-]{1,128}$/
const EMAIL_RE = /^[^\s@<>(),;:"]{1,64}@[^\s@<>(),;:"]{1,190}$/
const TEAM_INDEX = 'chatprovider-teams:'

/**
 * The OAuth-connected integrations (chat workspace, mail provider): the flow (authorize URL
 * with a signed, single-use, caller-bound state and PKCE where supported; callback that
 * exchanges the code, reads the account and creates — or, for the same account,
 * reconnects — the integration with its tokens encrypted in `config`), fresh access tokens
 * for deliveries (refreshed before they expire, and once more when the provider refuses
 * one), `needs_reconnect` when the grant is revoked, and revocation at the provider on
 * disconnect (`DELETE /v1/integrations/:id`, best effort).
 *
 * @example
 * ```ts
 * const { url } = await chatMail.authorize(caller.id, 'chatprovider', '/settings', 'https://berth.example.com')
 * // the browser consents; the provider sends it to /api/chatprovider/callback:
 * const location = await chatMail.callback('chatprovider', { code, state }, null) // '/settings?integration=connected&type=chatprovider&id=int_…'
 * ```
 */
export class ChatMailConnectService {
  /** Fresh access tokens for deliveries, and the types' channels (see {@link ConnectTokens}). */
  readonly tokens: ConnectTokens
  private readonly connectLock = new KeyedMutex()

  constructor(private readonly o: ChatMailConnectOptions) {
    this.tokens = new ConnectTokens(o)
    o.integrations.onRemove((r) => this.removed(r))
  }

  /** The configured provider of a type; 404 when this server has none. */
  private provider(type: ConnectType): ConnectProvider {
    const p = this.o.providers[type]
    if (!p) throw new ApiError('NOT_FOUND', `This server ${notConfigured(type)}`)
    return p
  }

  /** The provider's consent URL for the caller, with a fresh state bound to caller, type and return path. */
  async authorize(owner: string, type: ConnectType, returnPath: string, origin: string): Promise<{ url: string }> {
    const p = this.provider(type)
    const redirectUri = p.redirectUri ?? `${origin}/api/${type}/callback`
    const { state, codeChallenge } = await this.o.states.issue({
      owner,
      flow: `integration:${type}`,
      returnPath,
      redirectUri,
      pkce: p.oauth.pkce,
    })
    return { url: p.oauth.authorizeUrl({ state, redirectUri, codeChallenge }) }
  }

  /**
   * Finish the flow; answers where to send the browser. A bad state (forged, replayed,
   * expired, another type's, another caller's) is a 400 and nothing is stored. With a good
   * state every outcome goes back to its return path: `?integration=connected&type=…&id=…`,
   * or `?integration=error&type=…&reason=…` (`access_denied` or the provider's own code when
   * the user declined, `invalid_code`, `provider_rejected_client`, `provider_unavailable`).
   */
  async callback(type: ConnectType, query: ConnectCallbackInput, presentingCaller: string | null): Promise<string> {
    if (query.state === undefined)
      throw validationError([{ location: 'query', path: 'state', message: 'state is required' }])
    if (query.code === undefined && query.error === undefined)
      throw validationError([{ location: 'query', path: 'code', message: 'code is required' }])
    const st = await this.o.states.consume(query.state, { flow: `integration:${type}`, caller: presentingCaller })
    const fail = (reason: string) => withResult(st.return_path, { integration: 'error', type, reason })
    if (query.error !== undefined) return fail(/^[a-z0-9_]{1,64}$/.test(query.error) ? query.error : 'provider_error')
    const p = this.o.providers[type]
    if (!p) return fail('provider_unavailable')
    let tokens: OAuthTokens
    try {
      tokens = await p.oauth.exchangeCode({
        code: query.code!,
        redirectUri: st.redirect_uri,
        codeVerifier: st.code_verifier,
      })
    } catch (err) {
      return fail(this.failure(type, err))
    }
    let account: Record<string, string>
    try {
      account = this.checkedAccount(type, await p.account(tokens.access_token))
    } catch (err) {
      // A grant nobody will use: give it back.
      await p.oauth.revoke({ access_token: tokens.access_token, refresh_token: tokens.refresh_token }).catch(() => {})
      return fail(this.failure(type, err))
    }
    const r = await this.connect(st.owner, type, tokens, account)
    return withResult(st.return_path, { integration: 'connected', type, id: r.id })
  }

  private failure(type: ConnectType, err: unknown): string {
    const reason = !isProviderError(err, 'oauth')
      ? 'provider_unavailable'
      : err.kind === 'invalid_grant'
        ? 'invalid_code'
        : err.kind === 'client'
          ? 'provider_rejected_client'
          : 'provider_unavailable'
    this.o.logger.warn('connecting an integration failed', { type, reason, error: message(err) })
    return reason
  }

  /** The account fields, bounded; throws when the provider's answer lacks what a connection needs. */
  private checkedAccount(type: ConnectType, account: Record<string, string>): Record<string, string> {
    const out = Object.fromEntries(
      Object.entries(account)
        .filter(([, val]) => typeof val === 'string')
        .map(([k, val]) => [k.slice(0, 50), val.slice(0, 200)]),
    )
    if (!KEY_RE.test(out[TYPES[type].key] ?? ''))
      throw new Error(`the ${TYPES[type].label} answered without a usable ${TYPES[type].key}`)
    if (type === 'mailprovider' && !EMAIL_RE.test(out.email ?? ''))
      throw new Error('the mail provider answered without the mailbox address')
    return out
  }

  /**
   * Store a connection: a new integration (scope `all`, enabled), or — for an account the
   * owner already connected — the existing one with the new tokens and status `connected`.
   */
  async connect(
    owner: string,
    type: ConnectType,
    tokens: OAuthTokens,
    account: Record<string, string>,
  ): Promise<IntegrationRecord> {
    const key = TYPES[type].key
    const managed: Config = {
      ...account,
      access_token: tokens.access_token,
      refresh_token: tokens.refresh_token,
      expires_at: tokens.expires_at === null ? null : new Date(tokens.expires_at).toISOString(),
      scopes: tokens.scopes.slice(0, 50).map((s) => s.slice(0, 200)),
    }
    const record = await this.connectLock.run(owner, async () => {
      const existing = (await this.o.integrations.records.all(owner)).find(
        (r) => r.type === type && r.config[key] === account[key],
      )
      if (existing) {
        const updated = await this.o.integrations.reconnect(owner, existing.id, (r) => ({
          ...r,
          status: 'connected',
          config: sealConfig({ ...openConfig(r.config, this.o.cipher), ...managed }, this.o.cipher),
        }))
        if (updated) return updated
      }
      const now = isoNow(this.o.clock)
      return this.o.integrations.insert({
        id: newId('integration'),
        owner_id: owner,
        type,
        config: sealConfig({ ...TYPES[type].initial(account), ...managed }, this.o.cipher),
        enabled: true,
        is_default: false,
        status: 'connected',
        scope: 'all',
        profile_ids: [],
        created_at: now,
        updated_at: now,
      })
    })
    if (type === 'chatprovider')
      await this.o.store.set(`${TEAM_INDEX}${account.team_id}:${owner}:${record.id}`, {
        owner_id: owner,
        id: record.id,
      })
    return record
  }

  /** The owner's chat integrations connected to a workspace (for its events). */
  async chatIntegrationsOfTeam(teamId: string): Promise<IntegrationRecord[]> {
    if (!KEY_RE.test(teamId)) return []
    const out: IntegrationRecord[] = []
    for (const k of await this.o.store.keys(`${TEAM_INDEX}${teamId}:`)) {
      const [owner, id] = k.slice(TEAM_INDEX.length + teamId.length + 1).split(':')
      const r = owner && id ? await this.o.integrations.records.find(owner, id) : null
      if (r && r.type === 'chatprovider' && r.config.team_id === teamId) out.push(r)
      else await this.o.store.remove(k)
    }
    return out
  }

  /** After a disconnect: drop the workspace index and revoke the grant at the provider (best effort). */
  private async removed(r: IntegrationRecord): Promise<void> {
    if (!isConnectType(r.type)) return
    try {
      if (r.type === 'chatprovider' && typeof r.config.team_id === 'string')
        await this.o.store.remove(`${TEAM_INDEX}${r.config.team_id}:${r.owner_id}:${r.id}`)
      const p = this.o.providers[r.type]
      // A grant the provider already revoked has nothing left to revoke.
      if (!p || r.status === 'needs_reconnect') return
      const c = openConfig(r.config, this.o.cipher)
      let access = String(c.access_token ?? '')
      const refresh = typeof c.refresh_token === 'string' && c.refresh_token ? c.refresh_token : null
      // An expired access token cannot revoke anything: get a current one first.
      if (refresh && this.tokens.expired(c)) access = (await p.oauth.refresh(refresh)).access_token
      await p.oauth.revoke({ access_token: access, refresh_token: refresh })
    } catch (err) {
      this.o.logger.warn('could not revoke an integration grant at its provider', {
        integration: r.id,
        type: r.type,
        error: message(err),
      })
    }
  }
}
