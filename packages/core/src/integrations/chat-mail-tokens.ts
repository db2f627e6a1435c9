/** Fresh access tokens for the OAuth-connected integrations, and their delivery channel around the provider's transport. */
import { KeyedMutex } from '../internal/mutex.js'
import { withoutIntegration, type Channel, type ChannelIntegration } from '../ports/channel.js'
import type { Cipher } from '../ports/cipher.js'
import type { Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { DeliveryOutcome, OutgoingNotification } from '../ports/notifier.js'
import { isProviderError } from '../ports/provider-error.js'
import type { ConnectType } from '@berth/contract'
import { isConnectType, message, notConfigured, TYPES, type Config, type ConnectProvider } from './chat-mail-types.js'
import { openConfig, sealConfig } from './integration-config.js'
import type { IntegrationRecord, IntegrationsService } from './integrations.js'

export interface ConnectTokensOptions {
  clock: Clock
  cipher: Cipher
  logger: Logger
  integrations: IntegrationsService
  providers: Partial<Record<ConnectType, ConnectProvider>>
}

/** A usable access token with the integration's whole (decrypted) config, or why there is none. */
export type Fresh = { ok: true; config: Config } | { ok: false; error: string; retryable: boolean }

/** Refresh access tokens this long before they expire. */
const REFRESH_MARGIN_MS = 2 * 60_000

/**
 * The grants of OAuth-connected integrations: a usable access token for each delivery
 * (refreshed before it expires, and once more when the provider refuses it), and
 * `needs_reconnect` when the grant is revoked.
 *
 * @example
 * ```ts
 * const tokens = new ConnectTokens({ clock, cipher, logger, integrations, providers })
 * channels.wrap('chatprovider', (inner) => tokens.channel('chatprovider', inner))
 * ```
 */
export class ConnectTokens {
  private readonly refreshLock = new KeyedMutex()

  constructor(private readonly o: ConnectTokensOptions) {}

  private expiring(c: Config): boolean {
    return typeof c.expires_at === 'string' && Date.parse(c.expires_at) - REFRESH_MARGIN_MS <= this.o.clock.now()
  }

  /** True when the config's access token has expired. */
  expired(c: Config): boolean {
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
        const saved = await this.o.integrations.mutate(owner, id, (x) => ({
          ...x,
          config: sealConfig({ ...openConfig(x.config, this.o.cipher), ...tokens }, this.o.cipher),
        }))
        if (!saved) return { ok: false, error: 'the integration was deleted', retryable: false }
        return { ok: true, config: openConfig(saved.config, this.o.cipher) }
      } catch (err) {
        if (isProviderError(err, 'oauth') && err.kind === 'invalid_grant') {
          await this.markNeedsReconnect(cur, message(err))
          return this.reconnectError(cur.type)
        }
        this.o.logger.warn('could not refresh an integration token', {
          integration: id,
          type: cur.type,
          error: message(err),
        })
        if (usable) return { ok: true, config: c }
        return {
          ok: false,
          error: `could not refresh the access token: ${message(err)}`,
          retryable: !isProviderError(err, 'oauth') || err.kind === 'unavailable',
        }
      }
    })
  }

  private async markNeedsReconnect(r: IntegrationRecord, why: string): Promise<void> {
    this.o.logger.warn('an integration grant was revoked; it needs reconnecting', {
      integration: r.id,
      type: r.type,
      reason: why.slice(0, 200),
    })
    await this.o.integrations.mutate(r.owner_id, r.id, (x) => ({ ...x, status: 'needs_reconnect' }))
  }

  /**
   * The type's channel around the deployment's transport `inner` (which makes the provider
   * call): each delivery gets a fresh access token, a token the provider refuses is
   * refreshed and the delivery tried once more, and an integration whose grant is revoked
   * fails at once (`needs_reconnect`, no retries).
   */
  channel(type: ConnectType, inner: Channel): Channel {
    return {
      check: inner.check?.bind(inner),
      deliver: async (_config, n, integration) =>
        integration ? this.deliver(inner, type, n, integration) : withoutIntegration(type),
    }
  }

  private async deliver(
    inner: Channel,
    type: ConnectType,
    n: OutgoingNotification,
    integration: ChannelIntegration,
  ): Promise<DeliveryOutcome> {
    if (!this.o.providers[type])
      return { ok: false, status: null, error: `this server ${notConfigured(type)}`, retryable: false }
    const first = await this.fresh(integration.owner_id, integration.id)
    if (!first.ok) return { ok: false, status: null, error: first.error, retryable: first.retryable }
    const out = await inner.deliver(first.config, n, integration)
    if (out.ok || !out.unauthorized) return out
    const second = await this.fresh(integration.owner_id, integration.id, String(first.config.access_token))
    if (!second.ok) return { ...out, error: `${out.error}; ${second.error}`, retryable: false }
    const again = await inner.deliver(second.config, n, integration)
    if (again.ok || !again.unauthorized) return again
    const r = await this.o.integrations.records.find(integration.owner_id, integration.id)
    if (r) await this.markNeedsReconnect(r, again.error)
    return { ...again, error: `${again.error}; ${this.reconnectMessage(type)}`, retryable: false }
  }
}
