import {
  DEFAULT_APPROVAL_TIMEOUT_S,
  validationError,
  newId,
  type ModelInfo,
  Profile,
  ProfileSummary,
  type CreateProfile,
  type UpdateProfile,
} from '@berth/contract'
import { KeyedMutex } from '../internal/mutex.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Store } from '../ports/store.js'
import type { ApiKeysService } from './api-keys.js'
import { OwnedCollection, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import { toView } from '../records/view.js'
import { ViewCache } from '../records/view-cache.js'
import type { PubSub } from '../coordination/port.js'
import { assertOwnGitAccounts } from '../integrations/git-accounts.js'
import type { Cipher } from '../ports/cipher.js'
import { maskServers, sealServers } from './mcp-secrets.js'
import type { EnvironmentsService } from './environments.js'
import { agentModelAllowed } from '../models.js'
import type { Scoped } from '../records/scope.js'

export interface ProfileRecord extends OwnedRecord, Profile {}

/**
 * How long (ms) an instance answers `GET /v1/profiles/:id` from memory. A change made on the
 * same instance is seen at once; on another instance when the coordination's message arrives,
 * and within this bound if it is lost.
 */
export const DEFAULT_PROFILE_CACHE_MS = 1_000

/** The view fields that are not a plain copy of the record. */
function computed(r: ProfileRecord) {
  return {
    // Credentials in env and headers are never shown (see mcp-secrets.ts).
    mcp_servers: maskServers(r.mcp_servers),
    // Records written before Git accounts existed have no list.
    git_account_ids: r.git_account_ids ?? [],
    // Records written before environments existed have none: the default.
    environment_id: r.environment_id ?? null,
    // Records written before approvals existed: nothing waits for one.
    require_approval: r.require_approval ?? [],
    approval_timeout_s: r.approval_timeout_s ?? DEFAULT_APPROVAL_TIMEOUT_S,
    // Records written before spending limits existed: none.
    monthly_budget_usd: r.monthly_budget_usd ?? null,
  }
}

/**
 * Profiles: agent configurations. `slug` is unique per owner; `api_key_id` must be one of
 * the caller's credentials and `model` one the credential allows. Deleting a profile keeps
 * its workspaces.
 *
 * @example
 * ```ts
 * const p = await profiles.create(caller.id, { name: 'Docs bot', slug: 'docs', api_key_id: key.id })
 * ```
 */
export class ProfilesService {
  readonly records: OwnedCollection<ProfileRecord>
  private readonly slugLock = new KeyedMutex()
  /** `GET /v1/profiles/:id` answers from here: the busiest read of a profile (see `ViewCache`). */
  private readonly views: ViewCache<Profile>

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly apiKeys: ApiKeysService,
    private readonly cipher: Cipher,
    private readonly environments: EnvironmentsService,
    /**
     * How long a profile's view is served from this instance's memory (ms; 0: never), and the
     * pub/sub that tells the other instances of a change.
     */
    cache: { ms?: number | undefined; pubsub?: PubSub } = {},
  ) {
    this.records = new OwnedCollection<ProfileRecord>(store, 'profiles', 'profile')
    const shared = cache.pubsub && { pubsub: cache.pubsub, channel: 'view-cache:profiles' }
    this.views = new ViewCache(clock, cache.ms ?? DEFAULT_PROFILE_CACHE_MS, undefined, shared)
  }

  /** Stop listening for other instances' changes. */
  close(): Promise<void> {
    return this.views.close()
  }

  view(r: ProfileRecord): Profile {
    return toView(Profile, r, computed(r))
  }

  summary(r: ProfileRecord): ProfileSummary {
    return toView(ProfileSummary, r, computed(r))
  }

  /** 400 unless the credential is the caller's and allows the model. */
  private async checkCredential(owner: string, apiKeyId: string, model: string | null): Promise<void> {
    const key = await this.apiKeys.records.find(owner, apiKeyId)
    if (!key)
      throw validationError([{ location: 'body', path: 'api_key_id', message: `api key ${apiKeyId} does not exist` }])
    if (model !== null && !this.apiKeys.modelsOf(key).some((m) => m.id === model)) {
      throw validationError([
        { location: 'body', path: 'model', message: `model "${model}" is not available with api key ${apiKeyId}` },
      ])
    }
  }

  private async checkSlug(owner: string, slug: string, selfId?: string): Promise<void> {
    const taken = (await this.records.all(owner)).some((p) => p.slug === slug && p.id !== selfId)
    if (taken)
      throw validationError([
        { location: 'body', path: 'slug', message: `slug "${slug}" is already used by another profile` },
      ])
  }

  async create(owner: string, input: CreateProfile): Promise<Profile> {
    await this.checkCredential(owner, input.api_key_id, input.model ?? null)
    if (input.git_account_ids) await assertOwnGitAccounts(this.store, owner, input.git_account_ids)
    if (input.environment_id) await this.environments.assertOwn(owner, input.environment_id)
    // The slug check and the write must not interleave with another create of the same owner.
    return this.slugLock.run(owner, async () => {
      await this.checkSlug(owner, input.slug)
      const now = isoNow(this.clock)
      const record: ProfileRecord = {
        id: newId('profile'),
        owner_id: owner,
        name: input.name,
        slug: input.slug,
        api_key_id: input.api_key_id,
        description: input.description ?? '',
        model: input.model ?? null,
        default_tools: input.default_tools ?? [],
        mcp_servers: sealServers(input.mcp_servers ?? {}, this.cipher, undefined, 'mcp_servers'),
        claude_md: input.claude_md ?? '',
        memory_enabled: input.memory_enabled ?? false,
        persistent_sessions: input.persistent_sessions ?? false,
        git_account_ids: [...new Set(input.git_account_ids ?? [])],
        environment_id: input.environment_id ?? null,
        require_approval: [...new Set(input.require_approval ?? [])],
        approval_timeout_s: input.approval_timeout_s ?? DEFAULT_APPROVAL_TIMEOUT_S,
        monthly_budget_usd: input.monthly_budget_usd ?? null,
        created_at: now,
        updated_at: now,
      }
      return this.view(await this.records.put(record))
    })
  }

  get(owner: string, id: string): Promise<Profile> {
    return this.views.read(`${owner}:${id}`, async () => this.view(await this.records.get(owner, id)))
  }

  async list(owner: string, page: Page): Promise<Paged<ProfileSummary>> {
    const { items, total, next } = await this.records.list(owner, page)
    return { items: items.map((r) => this.summary(r)), total, next }
  }

  async update(owner: string, id: string, input: UpdateProfile): Promise<Profile> {
    return this.slugLock.run(owner, async () => {
      const r = await this.records.get(owner, id)
      const next: ProfileRecord = { ...r, updated_at: isoNow(this.clock) }
      for (const [k, val] of Object.entries(input))
        if (val !== undefined) (next as unknown as Record<string, unknown>)[k] = val
      if (input.api_key_id !== undefined || input.model !== undefined)
        await this.checkCredential(owner, next.api_key_id, next.model)
      if (input.slug !== undefined && input.slug !== r.slug) await this.checkSlug(owner, input.slug, id)
      if (input.mcp_servers !== undefined)
        next.mcp_servers = sealServers(input.mcp_servers, this.cipher, r.mcp_servers, 'mcp_servers')
      if (input.environment_id) await this.environments.assertOwn(owner, input.environment_id)
      if (input.git_account_ids !== undefined) {
        await assertOwnGitAccounts(this.store, owner, input.git_account_ids)
        next.git_account_ids = [...new Set(input.git_account_ids)]
      }
      try {
        return this.view(await this.records.put(next))
      } finally {
        this.views.drop(`${owner}:${id}`)
      }
    })
  }

  /** Delete the profile. Its workspaces, memory and tasks stay. */
  async remove(owner: string, id: string): Promise<void> {
    try {
      await this.records.remove(owner, id)
    } finally {
      this.views.drop(`${owner}:${id}`)
    }
  }

  /**
   * 400 naming `path` unless the profile's credential allows `model` (a workspace's
   * `model_override` is checked against its profile's credential when it is set).
   */
  async assertModel(owner: string, profileId: string | null, model: string, path: string): Promise<void> {
    const profile = profileId ? await this.records.find(owner, profileId) : null
    if (!profile)
      throw validationError([
        { location: 'body', path, message: "the workspace's profile no longer exists, so no model can be checked" },
      ])
    const key = await this.apiKeys.records.find(owner, profile.api_key_id)
    if (!key || !this.apiKeys.modelsOf(key).some((m) => m.id === model)) {
      throw validationError([
        {
          location: 'body',
          path,
          message: `model "${model}" is not available with api key ${profile.api_key_id} of profile ${profile.id}`,
        },
      ])
    }
  }

  /**
   * 400 naming `model` unless the credential of every profile an agent applies to (`scope`:
   * all the owner's profiles, or the selected ones) allows the agent's `model`, by the rule a
   * task's start checks again ({@link agentModelAllowed}). `null` (the main agent's model) passes.
   */
  async assertAgentModel(owner: string, scope: Scoped, model: string | null): Promise<void> {
    if (model === null) return
    const profiles =
      scope.scope === 'all'
        ? await this.records.all(owner)
        : (await Promise.all(scope.profile_ids.map((id) => this.records.find(owner, id)))).filter((p) => p !== null)
    const allowed = new Map<string, string[]>()
    for (const p of profiles) {
      if (!allowed.has(p.api_key_id)) {
        const key = await this.apiKeys.records.find(owner, p.api_key_id)
        allowed.set(p.api_key_id, key ? this.apiKeys.modelsOf(key).map((m) => m.id) : [])
      }
      if (agentModelAllowed(model, allowed.get(p.api_key_id)!)) continue
      throw validationError([
        {
          location: 'body',
          path: 'model',
          message: `model "${model}" is not available with api key ${p.api_key_id} of profile ${p.id}, which this agent applies to`,
        },
      ])
    }
  }

  /** Models the profile's credential allows. */
  async models(owner: string, id: string): Promise<ModelInfo[]> {
    const r = await this.records.get(owner, id)
    const key = await this.apiKeys.records.find(owner, r.api_key_id)
    return key ? this.apiKeys.modelsOf(key) : []
  }
}
