import { ApiError, validationError } from '../errors.js'
import { newId } from '../ids.js'
import { KeyedMutex } from '../internal/mutex.js'
import type { Cipher } from '../ports/cipher.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { DeliveryOutcome, NotificationTarget, Notifier, OutgoingNotification } from '../ports/notifier.js'
import type { OAuthClient, OAuthTokens } from '../ports/oauth-client.js'
import { isProviderError } from '../ports/provider-error.js'
import type { Store } from '../ports/store.js'
import { CONNECT_TYPES, type ConnectType } from '../schemas/chat-mail.js'
import { withResult } from '../schemas/oauth-return-path.js'
import { openConfig, sealConfig } from './integration-config.js'
import type { IntegrationRecord, IntegrationsService } from './integrations.js'
import type { OAuthStates } from './oauth-state.js'

/**
 * One OAuth-connected integration provider (the chat workspace or the mail provider): its
 * OAuth client and how to learn which account a token belongs to. Built by the server from
 * `createBerth({ chatProvider, mailProvider })`.
 */
export interface ConnectProvider {
  oauth: OAuthClient
  /**
   * The account a token belongs to, as the config fields the flow owns: `team_id`,
   * `team_name`, `bot_user_id` (chat); `account_id`, `email` (mail). Throws a `ProviderError` of `oauth`.
   */
  account(accessToken: string): Promise<Record<string, string>>
  /** A fixed OAuth redirect URI; default: `/api/<type>/callback` on the authorize request's origin. */
  redirectUri?: string | undefined
}

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

type Config = Record<string, unknown>

/** A usable access token with the integration's whole (decrypted) config, or why there is none. */
type Fresh = { ok: true; config: Config } | { ok: false; error: string; retryable: boolean }

interface TypeInfo {
  label: string
  /** The `createBerth` option that configures it. */
  option: string
  /** The account field that identifies a connection: connecting the same account again updates it. */
  key: string
  /** The caller-editable config a new connection starts with. */
  initial: (account: Record<string, string>) => Config
}

const TYPES: Record<ConnectType, TypeInfo> = {
  chatprovider: { label: 'chat provider', option: 'chatProvider', key: 'team_id', initial: () => ({ channel: null }) },
  mailprovider: { label: 'mail provider', option: 'mailProvider', key: 'account_id', initial: (a) => ({ recipients: [a.email] }) },
}

/** Refresh access tokens this long before they expire. */
const REFRESH_MARGIN_MS = 2 * 60_000
/** Team ids become part of store keys. */
const KEY_RE = /^[A-Za-z0-9_.@+-]{1,128}$/
const EMAIL_RE = /^[^\s@<>(),;:"]{1,64}@[^\s@<>(),;:"]{1,190}$/
const TEAM_INDEX = 'chatprovider-teams:'

/**
 * True for `chatprovider` and `mailprovider`.
 *
 * @example
 * ```ts
 * isConnectType('mailprovider') // true
 * isConnectType('webhook') // false
 * ```
 */
export function isConnectType(type: string): type is ConnectType {
  return (CONNECT_TYPES as readonly string[]).includes(type)
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err))

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
  private readonly refreshLock = new KeyedMutex()
  private readonly connectLock = new KeyedMutex()

  constructor(private readonly o: ChatMailConnectOptions) {
    o.integrations.onRemove((r) => this.removed(r))
  }

  /** The configured provider of a type; 404 when this server has none. */
  private provider(type: ConnectType): ConnectProvider {
    const p = this.o.providers[type]
    if (!p) throw new ApiError('NOT_FOUND', `This server has no ${TYPES[type].label} configured (createBerth({ ${TYPES[type].option} }))`)
    return p
  }

  /** The provider's consent URL for the caller, with a fresh state bound to caller, type and return path. */
  async authorize(owner: string, type: ConnectType, returnPath: string, origin: string): Promise<{ url: string }> {
    const p = this.provider(type)
    const redirectUri = p.redirectUri ?? `${origin}/api/${type}/callback`
    const { state, codeChallenge } = await this.o.states.issue({ owner, flow: `integration:${type}`, returnPath, redirectUri, pkce: p.oauth.pkce })
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
    if (query.state === undefined) throw validationError([{ location: 'query', path: 'state', message: 'state is required' }])
    if (query.code === undefined && query.error === undefined) throw validationError([{ location: 'query', path: 'code', message: 'code is required' }])
    const st = await this.o.states.consume(query.state, { flow: `integration:${type}`, caller: presentingCaller })
    const fail = (reason: string) => withResult(st.return_path, { integration: 'error', type, reason })
    if (query.error !== undefined) return fail(/^[a-z0-9_]{1,64}$/.test(query.error) ? query.error : 'provider_error')
    const p = this.o.providers[type]
    if (!p) return fail('provider_unavailable')
    let tokens: OAuthTokens
    try {
      tokens = await p.oauth.exchangeCode({ code: query.code!, redirectUri: st.redirect_uri, codeVerifier: st.code_verifier })
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
    const reason = !isProviderError(err, 'oauth') ? 'provider_unavailable' : err.kind === 'invalid_grant' ? 'invalid_code' : err.kind === 'client' ? 'provider_rejected_client' : 'provider_unavailable'
    this.o.logger.warn('connecting an integration failed', { type, reason, error: message(err) })
    return reason
  }

  /** The account fields, bounded; throws when the provider's answer lacks what a connection needs. */
  private checkedAccount(type: ConnectType, account: Record<string, string>): Record<string, string> {
    const out = Object.fromEntries(Object.entries(account).filter(([, val]) => typeof val === 'string').map(([k, val]) => [k.slice(0, 50), val.slice(0, 200)]))
    if (!KEY_RE.test(out[TYPES[type].key] ?? '')) throw new Error(`the ${TYPES[type].label} answered without a usable ${TYPES[type].key}`)
    if (type === 'mailprovider' && !EMAIL_RE.test(out.email ?? '')) throw new Error('the mail provider answered without the mailbox address')
    return out
  }

  /**
   * Store a connection: a new integration (scope `all`, enabled), or — for an account the
   * owner already connected — the existing one with the new tokens and status `connected`.
   */
  async connect(owner: string, type: ConnectType, tokens: OAuthTokens, account: Record<string, string>): Promise<IntegrationRecord> {
    const key = TYPES[type].key
    const managed: Config = {
      ...account,
      access_token: tokens.access_token,
      refresh_token: tokens.refresh_token,
      expires_at: tokens.expires_at === null ? null : new Date(tokens.expires_at).toISOString(),
      scopes: tokens.scopes.slice(0, 50).map((s) => s.slice(0, 200)),
    }
    const record = await this.connectLock.run(owner, async () => {
      const existing = (await this.o.integrations.records.all(owner)).find((r) => r.type === type && r.config[key] === account[key])
      if (existing) {
        const updated = await this.o.integrations.mutate(owner, existing.id, (r) => ({
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
    if (type === 'chatprovider') await this.o.store.set(`${TEAM_INDEX}${account.team_id}:${owner}:${record.id}`, { owner_id: owner, id: record.id })
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

  private expiring(c: Config): boolean {
    return typeof c.expires_at === 'string' && Date.parse(c.expires_at) - REFRESH_MARGIN_MS <= this.o.clock.now()
  }

  private expired(c: Config): boolean {
    return typeof c.expires_at === 'string' && Date.parse(c.expires_at) <= this.o.clock.now()
  }

  private reconnectMessage(type: string): string {
    const label = isConnectType(type) ? TYPES[type].label : type
    return `the ${label} revoked this integration's grant: it needs reconnecting (GET /v1/integrations/${type}/authorize)`
  }

  private reconnectError(type: string): Fresh {
    return { ok: false, error: this.reconnectMessage(type), retryable: false }
  }

  /**
   * The integration's config with a usable access token: the stored one, or a refreshed one
   * when it expires soon or the provider just refused `refused`. A refresh the provider
   * refuses as `invalid_grant` (revoked) marks the integration `needs_reconnect`.
   */
  async fresh(owner: string, id: string, refused?: string): Promise<Fresh> {
    const r = await this.o.integrations.records.find(owner, id)
    if (!r) return { ok: false, error: 'the integration was deleted', retryable: false }
    if (r.status === 'needs_reconnect') return this.reconnectError(r.type)
    const stale = (c: Config) => (refused !== undefined && c.access_token === refused) || this.expiring(c)
    const config = openConfig(r.config, this.o.cipher)
    if (!stale(config)) return { ok: true, config }
    // One refresh per integration at a time: rotating refresh tokens are single-use.
    return this.refreshLock.run(id, async () => {
      const cur = await this.o.integrations.records.find(owner, id)
      if (!cur) return { ok: false, error: 'the integration was deleted', retryable: false }
      if (cur.status === 'needs_reconnect') return this.reconnectError(cur.type)
      const c = openConfig(cur.config, this.o.cipher)
      if (!stale(c)) return { ok: true, config: c }
      const p = isConnectType(cur.type) ? this.o.providers[cur.type] : undefined
      if (!p) return { ok: false, error: `this server has no ${cur.type} configured`, retryable: false }
      const usable = refused === undefined && !this.expired(c)
      if (typeof c.refresh_token !== 'string' || !c.refresh_token) {
        if (usable) return { ok: true, config: c }
        await this.markNeedsReconnect(cur, 'the access token lapsed and there is no refresh token')
        return this.reconnectError(cur.type)
      }
      try {
        const t = await p.oauth.refresh(c.refresh_token)
        const tokens: Config = {
          access_token: t.access_token,
          // Providers that rotate send a new refresh token; the others keep the old one.
          refresh_token: t.refresh_token ?? c.refresh_token,
          expires_at: t.expires_at === null ? null : new Date(t.expires_at).toISOString(),
          ...(t.scopes.length > 0 && { scopes: t.scopes.slice(0, 50) }),
        }
        const saved = await this.o.integrations.mutate(owner, id, (x) => ({ ...x, config: sealConfig({ ...openConfig(x.config, this.o.cipher), ...tokens }, this.o.cipher) }))
        if (!saved) return { ok: false, error: 'the integration was deleted', retryable: false }
        return { ok: true, config: openConfig(saved.config, this.o.cipher) }
      } catch (err) {
        if (isProviderError(err, 'oauth') && err.kind === 'invalid_grant') {
          await this.markNeedsReconnect(cur, message(err))
          return this.reconnectError(cur.type)
        }
        this.o.logger.warn('could not refresh an integration token', { integration: id, type: cur.type, error: message(err) })
        if (usable) return { ok: true, config: c }
        return { ok: false, error: `could not refresh the access token: ${message(err)}`, retryable: !isProviderError(err, 'oauth') || err.kind === 'unavailable' }
      }
    })
  }

  private async markNeedsReconnect(r: IntegrationRecord, why: string): Promise<void> {
    this.o.logger.warn('an integration grant was revoked; it needs reconnecting', { integration: r.id, type: r.type, reason: why.slice(0, 200) })
    await this.o.integrations.mutate(r.owner_id, r.id, (x) => ({ ...x, status: 'needs_reconnect' }))
  }

  /**
   * How the OAuth-connected types deliver, over the deployment's notifier `inner` (which
   * makes the provider call): each delivery gets a fresh access token, a token the provider
   * refuses is refreshed and the delivery tried once more, and an integration whose grant
   * is revoked fails at once (`needs_reconnect`, no retries).
   */
  deliveries(inner: Notifier): Record<ConnectType, Notifier['deliver']> {
    return {
      chatprovider: (target, n) => this.deliver(inner, target, 'chatprovider', n),
      mailprovider: (target, n) => this.deliver(inner, target, 'mailprovider', n),
    }
  }

  private async deliver(inner: Notifier, target: NotificationTarget, type: ConnectType, n: OutgoingNotification): Promise<DeliveryOutcome> {
    if (!this.o.providers[type]) {
      return { ok: false, status: null, error: `this server has no ${TYPES[type].label} configured (createBerth({ ${TYPES[type].option} }))`, retryable: false }
    }
    const first = await this.fresh(target.owner_id, target.id)
    if (!first.ok) return { ok: false, status: null, error: first.error, retryable: first.retryable }
    const out = await inner.deliver({ ...target, config: first.config }, n)
    if (out.ok || !out.unauthorized) return out
    const second = await this.fresh(target.owner_id, target.id, String(first.config.access_token))
    if (!second.ok) return { ...out, error: `${out.error}; ${second.error}`, retryable: false }
    const again = await inner.deliver({ ...target, config: second.config }, n)
    if (again.ok || !again.unauthorized) return again
    const r = await this.o.integrations.records.find(target.owner_id, target.id)
    if (r) await this.markNeedsReconnect(r, again.error)
    return { ...again, error: `${again.error}; ${this.reconnectMessage(type)}`, retryable: false }
  }

  /** After a disconnect: drop the workspace index and revoke the grant at the provider (best effort). */
  private async removed(r: IntegrationRecord): Promise<void> {
    if (!isConnectType(r.type)) return
    try {
      if (r.type === 'chatprovider' && typeof r.config.team_id === 'string') await this.o.store.remove(`${TEAM_INDEX}${r.config.team_id}:${r.owner_id}:${r.id}`)
      const p = this.o.providers[r.type]
      // A grant the provider already revoked has nothing left to revoke.
      if (!p || r.status === 'needs_reconnect') return
      const c = openConfig(r.config, this.o.cipher)
      let access = String(c.access_token ?? '')
      const refresh = typeof c.refresh_token === 'string' && c.refresh_token ? c.refresh_token : null
      // An expired access token cannot revoke anything: get a current one first.
      if (refresh && this.expired(c)) access = (await p.oauth.refresh(refresh)).access_token
      await p.oauth.revoke({ access_token: access, refresh_token: refresh })
    } catch (err) {
      this.o.logger.warn('could not revoke an integration grant at its provider', { integration: r.id, type: r.type, error: message(err) })
    }
  }
}
