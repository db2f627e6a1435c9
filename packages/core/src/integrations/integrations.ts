import {
  validationError,
  newId,
  DIRECT_INTEGRATION_TYPES,
  type CreateIntegration,
  Integration,
  type IntegrationStatus,
  type IntegrationType,
  type UpdateIntegration,
} from '@berth/contract'
import { term } from '../records/indexes.js'
import { KeyedMutex } from '../internal/mutex.js'
import type { Cipher } from '../ports/cipher.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { NotificationTarget, Notifier } from '../ports/notifier.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import { toView } from '../records/view.js'
import type { DeliveryLog } from './deliveries.js'
import type { AuditLog } from '../audit/log.js'
import {
  configIssues,
  depthIssues,
  keepManaged,
  maskConfig,
  openConfig,
  restoreMasks,
  sealConfig,
} from './integration-config.js'
import { appliesTo, resolveScope, type Scoped } from '../records/scope.js'

/** A stored integration; secret config fields are encrypted. */
export interface IntegrationRecord extends OwnedRecord, Scoped {
  type: IntegrationType
  config: Record<string, unknown>
  enabled: boolean
  is_default: boolean
  /** Absent: `connected`. Connect flows set `needs_reconnect` when the provider revoked the grant. */
  status?: IntegrationStatus
}

/**
 * Integrations: where notifications go. `webhook` and `email` are created here; the other
 * types come from their connect flows and share this storage. Secret config fields
 * (`bot_token`, `refresh_token`, `access_token`, `api_key`, `secret`) are encrypted at rest
 * and read `••••••••` in every response; a PATCH that sends the mask back keeps the value.
 * At most one integration per type is the default.
 *
 * @example
 * ```ts
 * const hook = await integrations.create(caller.id, { type: 'webhook', config: { url: 'https://example.com/hook', secret: 's3cret' } })
 * hook.config.secret // '••••••••'
 * ```
 */
export class IntegrationsService {
  readonly records: OwnedCollection<IntegrationRecord>
  private readonly lock = new KeyedMutex()
  private readonly removeHooks: ((r: IntegrationRecord) => Promise<void>)[] = []

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cipher: Cipher,
    private readonly notifier: Notifier,
    private readonly deliveries: DeliveryLog,
    private readonly audit?: AuditLog,
  ) {
    this.records = new OwnedCollection<IntegrationRecord>(store, 'integrations', 'integration')
  }

  view(r: IntegrationRecord): Integration {
    return toView(Integration, r, { config: maskConfig(r.config), status: r.status ?? 'connected' })
  }

  /** Restore masks, check shape and reachability; the plaintext config to store, or 400. */
  private async checkedConfig(
    type: IntegrationType,
    input: Record<string, unknown>,
    stored: Record<string, unknown> | undefined,
  ) {
    const deep = depthIssues(input)
    if (deep.length) throw validationError(deep)
    const { config, issues } = restoreMasks(input, stored)
    issues.push(...configIssues(type, config))
    if (issues.length) throw validationError(issues)
    const remote = (await this.notifier.check?.(type, config)) ?? []
    if (remote.length) throw validationError(remote)
    return config
  }

  /** Clear `is_default` on the owner's other integrations of the type. */
  private async clearDefault(owner: string, type: IntegrationType, keep: string): Promise<void> {
    for (const r of await this.records.all(owner)) {
      if (r.type === type && r.is_default && r.id !== keep)
        await this.records.put({ ...r, is_default: false, updated_at: isoNow(this.clock) })
    }
  }

  async create(owner: string, input: CreateIntegration): Promise<Integration> {
    if (!(DIRECT_INTEGRATION_TYPES as readonly string[]).includes(input.type)) {
      throw validationError([
        {
          location: 'body',
          path: 'type',
          message: `${input.type} integrations are connected through their own flow; create webhook or email here`,
        },
      ])
    }
    const config = await this.checkedConfig(input.type, input.config, undefined)
    const scope = await resolveScope(this.store, owner, input, undefined)
    return this.lock.run(owner, async () => {
      const now = isoNow(this.clock)
      const record: IntegrationRecord = {
        id: newId('integration'),
        owner_id: owner,
        type: input.type,
        config: sealConfig(config, this.cipher),
        enabled: input.enabled ?? true,
        is_default: input.is_default ?? false,
        ...scope,
        created_at: now,
        updated_at: now,
      }
      if (record.is_default) await this.clearDefault(owner, record.type, record.id)
      await this.records.put(record)
      await this.audited('integration.created', record)
      return this.view(record)
    })
  }

  async get(owner: string, id: string): Promise<Integration> {
    return this.view(await this.records.get(owner, id))
  }

  async list(owner: string, page: Page, filter: { type?: IntegrationType | undefined }): Promise<Paged<Integration>> {
    const { items, total, next } = await this.records.list(owner, page, term({ type: filter.type }))
    return { items: items.map((r) => this.view(r)), total, next }
  }

  async update(owner: string, id: string, input: UpdateIntegration): Promise<Integration> {
    const current = await this.records.get(owner, id)
    const config =
      input.config === undefined
        ? undefined
        : await this.checkedConfig(current.type, input.config, openConfig(current.config, this.cipher))
    const scope =
      input.scope !== undefined || input.profile_ids !== undefined
        ? await resolveScope(this.store, owner, input, current)
        : { scope: current.scope, profile_ids: current.profile_ids }
    return this.lock.run(owner, async () => {
      const latest = await this.records.get(owner, id)
      const next: IntegrationRecord = {
        ...latest,
        // Fields a connect flow owns (tokens, account) are taken from the latest record: a token refreshed meanwhile stays.
        ...(config && {
          config: sealConfig(keepManaged(latest.type, config, openConfig(latest.config, this.cipher)), this.cipher),
        }),
        ...(input.enabled !== undefined && { enabled: input.enabled }),
        ...(input.is_default !== undefined && { is_default: input.is_default }),
        ...scope,
        updated_at: isoNow(this.clock),
      }
      if (next.is_default && !latest.is_default) await this.clearDefault(owner, next.type, next.id)
      await this.records.put(next)
      await this.audited('integration.updated', next)
      return this.view(next)
    })
  }

  /** Disconnect: the integration and its delivery records go. */
  async remove(owner: string, id: string): Promise<void> {
    const removed = await this.records.remove(owner, id)
    await this.audited('integration.deleted', removed)
    await this.deliveries.clear(owner, id)
    for (const hook of this.removeHooks) await hook(removed)
  }

  /** Run `hook` after an integration is removed (a connect flow revokes its grant, drops its indexes). It must not throw. */
  onRemove(hook: (r: IntegrationRecord) => Promise<void>): void {
    this.removeHooks.push(hook)
  }

  /**
   * Change a stored record under the owner's lock (so it cannot interleave with a PATCH):
   * the changed record, or null when it is gone. For connect flows (tokens, status).
   */
  async mutate(
    owner: string,
    id: string,
    change: (r: IntegrationRecord) => IntegrationRecord,
  ): Promise<IntegrationRecord | null> {
    return this.lock.run(owner, async () => {
      const r = await this.records.find(owner, id)
      return r
        ? this.records.put({ ...change(r), id: r.id, owner_id: r.owner_id, updated_at: isoNow(this.clock) })
        : null
    })
  }

  /** A connect flow connected an existing integration again (new tokens or account): {@link mutate}, recorded as a change. */
  async reconnect(
    owner: string,
    id: string,
    change: (r: IntegrationRecord) => IntegrationRecord,
  ): Promise<IntegrationRecord | null> {
    const updated = await this.mutate(owner, id, change)
    if (updated) await this.audited('integration.updated', updated)
    return updated
  }

  /** Store a record a connect flow built (under the owner's lock). */
  async insert(record: IntegrationRecord): Promise<IntegrationRecord> {
    await this.lock.run(record.owner_id, () => this.records.put(record))
    await this.audited('integration.created', record)
    return record
  }

  /** The audit entry of a change (a connect flow's callback is public: the owner is who connected). */
  private audited(action: `integration.${'created' | 'updated' | 'deleted'}`, r: IntegrationRecord): Promise<void> {
    return (
      this.audit?.record({
        action,
        target: { type: 'integration', id: r.id },
        details: { type: r.type },
        actor: { type: 'user', id: r.owner_id },
      }) ?? Promise.resolve()
    )
  }

  private target(r: IntegrationRecord): NotificationTarget {
    return { id: r.id, owner_id: r.owner_id, type: r.type, config: openConfig(r.config, this.cipher) }
  }

  /** One integration ready to deliver through (secrets decrypted); 404 when not the owner's. */
  async targetOf(owner: string, id: string): Promise<NotificationTarget> {
    return this.target(await this.records.get(owner, id))
  }

  /** An enabled integration ready to deliver through, or `null` (deleted or disabled since). */
  async enabledTarget(owner: string, id: string): Promise<NotificationTarget | null> {
    const r = await this.records.find(owner, id)
    return r?.enabled ? this.target(r) : null
  }

  /** The owner's enabled integrations whose scope covers the profile, ready to deliver through. */
  async targetsFor(owner: string, profileId: string): Promise<NotificationTarget[]> {
    // Banking integrations are data sources: they receive no notifications.
    return (await this.records.all(owner))
      .filter((r) => r.enabled && r.type !== 'bankprovider' && appliesTo(r, profileId))
      .map((r) => this.target(r))
  }
}
