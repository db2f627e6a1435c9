import {
  ApiError,
  validationError,
  newId,
  type BankConnectPayload,
  type BankProviderConfig,
  type SetBankProviderConfig,
  type Integration,
} from '@berth/contract'
import { KeyedMutex } from '../internal/mutex.js'
import type { Cipher } from '../ports/cipher.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Channel, ChannelIntegration } from '../ports/channel.js'
import type { DeliveryOutcome, OutgoingNotification } from '../ports/notifier.js'
import type { Store } from '../ports/store.js'
import type { BankAccount, BankApi } from '../ports/bank-api.js'
import { isProviderError } from '../ports/provider-error.js'
import { sealConfig } from './integration-config.js'
import type { IntegrationRecord, IntegrationsService } from './integrations.js'

export interface BankProviderOptions {
  store: Store
  clock: Clock
  cipher: Cipher
  api: BankApi
  integrations: IntegrationsService
}

/** `bank-config:<owner>`: the caller's connect-widget settings. */
type StoredBankConfig = BankProviderConfig

/** Accounts kept in the integration's config (a summary for display; the provider stays the source). */
const MAX_ACCOUNTS = 20

/**
 * The banking-data provider (Teller-like). The dashboard starts the provider's connect
 * widget with the caller's settings (`setConfig`); the widget's success payload comes back
 * through `connect`, which verifies the access token against the provider (`GET /accounts`)
 * before anything is stored, then creates (or, for an enrollment connected before,
 * refreshes) a `bankprovider` integration whose `access_token` is encrypted at rest and
 * masked in every response. The integration is a data source, not a notification channel:
 * notifications skip it, and its test (`POST /v1/integrations/:id/test`) checks that the
 * provider still accepts the token (a refused one marks it `needs_reconnect`; connecting
 * the enrollment again clears that).
 *
 * @example
 * ```ts
 * await bank.setConfig(caller.id, { application_id: 'app_123', environment: 'sandbox' })
 * const integration = await bank.connect(caller.id, widgetPayload) // 502 BAD_GATEWAY if the provider refuses
 * integration.config.access_token // '••••••••'
 * ```
 */
export class BankProviderService {
  private readonly lock = new KeyedMutex()

  constructor(private readonly o: BankProviderOptions) {}

  /** Store the caller's widget settings (replacing earlier ones). */
  async setConfig(owner: string, input: SetBankProviderConfig): Promise<BankProviderConfig> {
    const config: StoredBankConfig = {
      application_id: input.application_id,
      environment: input.environment,
      products: [...new Set(input.products ?? (['balance', 'transactions'] as const))],
      select_account: input.select_account ?? 'multiple',
      updated_at: isoNow(this.o.clock),
    }
    await this.o.store.set(`bank-config:${owner}`, config)
    return config
  }

  /** Verify the widget's payload with the provider, then store the integration. Nothing is stored on any failure. */
  async connect(owner: string, payload: BankConnectPayload): Promise<Integration> {
    const accounts = await this.verify(payload.accessToken)
    if (accounts.some((a) => a.enrollment_id !== payload.enrollment.id)) {
      throw validationError([
        { location: 'body', path: 'enrollment.id', message: 'the access token belongs to another enrollment' },
      ])
    }
    const settings = await this.o.store.get<StoredBankConfig>(`bank-config:${owner}`)
    const config = {
      access_token: payload.accessToken,
      enrollment_id: payload.enrollment.id,
      institution: payload.enrollment.institution.name,
      user_id: payload.user.id,
      application_id: settings?.application_id ?? null,
      environment: settings?.environment ?? null,
      accounts: accounts.slice(0, MAX_ACCOUNTS).map((a) => ({
        id: a.id,
        name: a.name,
        type: a.type,
        subtype: a.subtype,
        last_four: a.last_four,
        currency: a.currency,
        status: a.status,
      })),
      verified_at: isoNow(this.o.clock),
    }
    return this.lock.run(owner, async () => {
      const integrations = this.o.integrations
      const existing = (await integrations.records.all(owner)).find(
        (r) => r.type === 'bankprovider' && r.config.enrollment_id === payload.enrollment.id,
      )
      const sealed = sealConfig(config, this.o.cipher)
      const updated =
        existing &&
        (await integrations.reconnect(owner, existing.id, (r) => ({ ...r, config: sealed, status: 'connected' })))
      if (updated) return integrations.view(updated)
      const now = isoNow(this.o.clock)
      const record: IntegrationRecord = {
        id: newId('integration'),
        owner_id: owner,
        type: 'bankprovider',
        config: sealed,
        enabled: true,
        is_default: false,
        scope: 'all',
        profile_ids: [],
        created_at: now,
        updated_at: now,
      }
      return integrations.view(await integrations.insert(record))
    })
  }

  /** The enrollment's accounts, or 502 BAD_GATEWAY saying why the provider did not answer with them. */
  private async verify(accessToken: string): Promise<BankAccount[]> {
    try {
      return await this.o.api.listAccounts(accessToken)
    } catch (err) {
      if (!isProviderError(err, 'bank')) throw err
      const why =
        err.kind === 'unauthorized'
          ? 'refused the access token'
          : err.kind === 'unavailable'
            ? 'is unavailable'
            : 'refused the request'
      throw new ApiError('BAD_GATEWAY', `The banking provider ${why}: ${err.message}`.slice(0, 500), {
        provider: 'bankprovider',
        reason: err.kind,
        provider_status: err.status,
        provider_code: err.code,
      })
    }
  }

  /**
   * The `bankprovider` channel: it delivers nothing; a test checks that the provider still
   * accepts the stored access token.
   */
  readonly channel: Channel = { deliver: (config, n, integration) => this.deliver(config, n, integration) }

  private async deliver(
    config: Record<string, unknown>,
    n: OutgoingNotification,
    target: ChannelIntegration | undefined,
  ): Promise<DeliveryOutcome> {
    if (n.event !== 'integration.test')
      return {
        ok: false,
        status: null,
        error: 'banking integrations are data sources: they receive no notifications',
        retryable: false,
      }
    const token = config.access_token
    if (typeof token !== 'string')
      return { ok: false, status: null, error: 'the integration has no access token', retryable: false }
    try {
      await this.o.api.listAccounts(token)
      return { ok: true, status: 200 }
    } catch (err) {
      if (!isProviderError(err, 'bank')) throw err
      if (err.kind === 'unauthorized' && target)
        await this.o.integrations.mutate(target.owner_id, target.id, (r) => ({ ...r, status: 'needs_reconnect' }))
      return { ok: false, status: err.status, error: err.message, retryable: err.kind === 'unavailable' }
    }
  }
}
