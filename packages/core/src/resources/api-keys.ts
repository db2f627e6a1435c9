import {
  ApiError,
  validationError,
  type ValidationIssue,
  newId,
  ApiKey,
  type CreateApiKey,
  type ModelInfo,
  modelAllowed,
  type UpdateApiKey,
} from '@berth/contract'
import type { ModelCatalog } from '../models.js'
import {
  bedrockOf,
  modelMapOfRecord,
  providerFields,
  vertexOf,
  type BedrockCredential,
  type ProviderRecordFields,
  type VertexCredential,
} from './cloud-credentials.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Cipher } from '../ports/cipher.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import { toView } from '../records/view.js'

/** The fields of the `ApiKey` view that a record computes or may lack (credentials from before Bedrock and Vertex). */
type ProviderViewFields =
  | 'has_key'
  | 'has_session_token'
  | 'aws_access_key_id'
  | 'aws_region'
  | 'gcp_client_email'
  | 'gcp_project_id'
  | 'gcp_region'
  | 'model_map'

/** A stored model credential: its secrets only as ciphertext. */
export interface ApiKeyRecord extends OwnedRecord, Omit<ApiKey, ProviderViewFields>, ProviderRecordFields {}

/** Checks a base URL against the deployment's address policy (the webhooks' one); issues name `url`. */
export type UrlCheck = (url: string) => Promise<ValidationIssue[]>

/** The fields of a profile a credential's rules look at. */
interface ProfileUse extends OwnedRecord {
  api_key_id: string
  model: string | null
}

/**
 * The resolved credential a task uses: provider, base URL and the plaintext secrets. `key`
 * is the Anthropic key (null for the other providers, whose credentials only the model
 * gateway gets: `bedrock`, `vertex`), `model_map` the ids the provider knows the models by.
 */
export interface ResolvedCredential {
  provider: ApiKey['provider']
  key: string | null
  base_url: string | null
  bedrock: BedrockCredential | null
  vertex: VertexCredential | null
  model_map: Record<string, string>
}

/**
 * Model credentials (`/v1/api-keys`). The key is write-only: encrypted at rest with the
 * deployment's cipher and never returned; `has_key` says whether one is set.
 *
 * @example
 * ```ts
 * const k = await apiKeys.create(caller.id, { name: 'prod', provider: 'anthropic', key: 'sk-ant-...' })
 * k.has_key // true; the key itself is never in a response
 * ```
 */
export class ApiKeysService {
  readonly records: OwnedCollection<ApiKeyRecord>
  /** Profiles, read only to see which use a credential (profiles are built on this service). */
  private readonly profiles: OwnedCollection<ProfileUse>

  constructor(
    store: Store,
    private readonly cipher: Cipher,
    private readonly clock: Clock,
    private readonly catalog: ModelCatalog,
    private readonly checkUrl: UrlCheck = async () => [],
  ) {
    this.records = new OwnedCollection<ApiKeyRecord>(store, 'apikeys', 'api key')
    this.profiles = new OwnedCollection<ProfileUse>(store, 'profiles', 'profile')
  }

  /** 400 naming `base_url` when it points where webhooks may not (private, loopback, link-local). */
  private async checkBaseUrl(url: string | null | undefined): Promise<void> {
    if (!url) return
    const issues = await this.checkUrl(url)
    if (issues.length)
      throw validationError(
        issues.map((i) => ({
          ...i,
          path: 'base_url',
          message: i.message.replace('send webhooks to', 'let model credentials reach'),
        })),
      )
  }

  private async usedBy(owner: string, id: string): Promise<ProfileUse[]> {
    return (await this.profiles.all(owner)).filter((p) => p.api_key_id === id)
  }

  /** The response view: the `ApiKey` schema's fields only, so the ciphertext never leaves. */
  view(r: ApiKeyRecord): ApiKey {
    return toView(ApiKey, r, {
      has_key: r.key_encrypted !== null,
      has_session_token: Boolean(r.session_token_encrypted),
      aws_access_key_id: r.aws_access_key_id ?? null,
      aws_region: r.aws_region ?? null,
      gcp_client_email: r.gcp_client_email ?? null,
      gcp_project_id: r.gcp_project_id ?? null,
      gcp_region: r.gcp_region ?? null,
      model_map: r.model_map ?? null,
    })
  }

  /** The provider's own fields of a body (secrets encrypted), or a 400. */
  private fields(provider: ApiKey['provider'], input: CreateApiKey | UpdateApiKey, current: ApiKeyRecord | null) {
    return providerFields(provider, input, current, { cipher: this.cipher, checkUrl: this.checkUrl })
  }

  async create(owner: string, input: CreateApiKey): Promise<ApiKey> {
    if (input.provider === 'anthropic' && !input.key) {
      throw validationError([{ location: 'body', path: 'key', message: 'a key is required for provider "anthropic"' }])
    }
    await this.checkBaseUrl(input.base_url)
    const fields = await this.fields(input.provider, input, null)
    const now = isoNow(this.clock)
    const record: ApiKeyRecord = {
      id: newId('apiKey'),
      owner_id: owner,
      name: input.name,
      provider: input.provider,
      base_url: input.base_url ?? null,
      allowed_models: input.allowed_models ?? null,
      key_encrypted: null,
      ...fields,
      created_at: now,
      updated_at: now,
    }
    return this.view(await this.records.put(record))
  }

  async get(owner: string, id: string): Promise<ApiKey> {
    return this.view(await this.records.get(owner, id))
  }

  async list(owner: string, page: Page): Promise<Paged<ApiKey>> {
    const { items, total, next } = await this.records.list(owner, page)
    return { items: items.map((r) => this.view(r)), total, next }
  }

  async update(owner: string, id: string, input: UpdateApiKey): Promise<ApiKey> {
    const r = await this.records.get(owner, id)
    await this.checkBaseUrl(input.base_url)
    const fields = await this.fields(r.provider, input, r)
    if (input.allowed_models !== undefined) {
      // Narrowing must not leave a profile on a model the credential no longer allows.
      const stranded = (await this.usedBy(owner, id)).filter(
        (p) => p.model !== null && !modelAllowed(p.model, input.allowed_models ?? null),
      )
      if (stranded.length) {
        throw validationError([
          {
            location: 'body',
            path: 'allowed_models',
            message: `profile ${stranded[0]!.id} uses model "${stranded[0]!.model}", which these patterns leave out: change its model first`,
          },
        ])
      }
    }
    const next: ApiKeyRecord = {
      ...r,
      ...(input.name !== undefined && { name: input.name }),
      ...(input.base_url !== undefined && { base_url: input.base_url }),
      ...(input.allowed_models !== undefined && { allowed_models: input.allowed_models }),
      ...fields,
      updated_at: isoNow(this.clock),
    }
    return this.view(await this.records.put(next))
  }

  /** Delete a credential no profile uses; 409 CONFLICT naming the profiles otherwise. */
  async remove(owner: string, id: string): Promise<void> {
    await this.records.get(owner, id)
    const users = await this.usedBy(owner, id)
    if (users.length) {
      throw new ApiError(
        'CONFLICT',
        `Model credential ${id} is used by ${users.length} profile(s): point them at another credential first`,
        {
          profile_ids: users.map((p) => p.id).slice(0, 50),
        },
      )
    }
    await this.records.remove(owner, id)
  }

  /** The models a credential's capabilities allow. */
  async models(owner: string, id: string): Promise<ModelInfo[]> {
    const r = await this.records.get(owner, id)
    return this.modelsOf(r)
  }

  modelsOf(r: ApiKeyRecord): ModelInfo[] {
    const map = modelMapOfRecord(r)
    return this.catalog
      .models(r.provider)
      .filter((m) => modelAllowed(m.id, r.allowed_models))
      .map((m) => ({ ...m, provider: r.provider, ...(map[m.id] && { provider_model_id: map[m.id] }) }))
  }

  /** The plaintext credential for running a task. Never put the result in a response. */
  async resolve(owner: string, id: string): Promise<ResolvedCredential> {
    const r = await this.records.get(owner, id)
    const anthropic = r.provider === 'anthropic' || r.provider === 'stub'
    return {
      provider: r.provider,
      base_url: r.base_url,
      key: anthropic && r.key_encrypted ? this.cipher.decrypt(r.key_encrypted) : null,
      bedrock: bedrockOf(r, this.cipher),
      vertex: vertexOf(r, this.cipher),
      model_map: modelMapOfRecord(r),
    }
  }
}
