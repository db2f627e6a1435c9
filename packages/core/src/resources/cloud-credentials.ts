/**
 * What a model credential holds per provider, beyond the name and the rules every
 * credential has: the Anthropic key; Bedrock's access key, secret, session token and
 * region; Vertex's service account key, project and region. Secrets are encrypted with the
 * deployment's cipher, never returned, and resolved only for the model gateway.
 */
import { createPrivateKey } from 'node:crypto'
import * as v from 'valibot'
import {
  ServiceAccountKey,
  validationError,
  type CreateApiKey,
  type ModelProvider,
  type UpdateApiKey,
  type ValidationIssue,
} from '@berth/contract'
import type { Cipher } from '../ports/cipher.js'
import { modelMapOf } from './provider-models.js'

/** The provider-specific fields of a stored credential (absent on credentials from before them). */
export interface ProviderRecordFields {
  /** The Anthropic key, the AWS secret access key or the service account's JSON key, encrypted. */
  key_encrypted: string | null
  session_token_encrypted?: string | null
  aws_access_key_id?: string | null
  aws_region?: string | null
  gcp_client_email?: string | null
  gcp_project_id?: string | null
  gcp_region?: string | null
  model_map?: Record<string, string> | null
}

/** Bedrock's credentials, in plaintext: for the model gateway only. */
export interface BedrockCredential {
  access_key_id: string
  secret_access_key: string
  session_token: string | null
  region: string
}

/** Vertex AI's credentials, in plaintext: for the model gateway only. */
export interface VertexCredential {
  service_account: ServiceAccountKey
  project_id: string
  region: string
}

/** Checks a URL against the deployment's address policy; issues name `url`. */
type UrlCheck = (url: string) => Promise<ValidationIssue[]>

type Input = CreateApiKey | UpdateApiKey

const BEDROCK_FIELDS = ['aws_access_key_id', 'aws_secret_access_key', 'aws_session_token', 'aws_region'] as const
const VERTEX_FIELDS = ['gcp_service_account', 'gcp_project_id', 'gcp_region'] as const

/** The body fields each provider takes beyond name, base_url and allowed_models. */
const FIELDS: Record<ModelProvider, readonly string[]> = {
  anthropic: ['key'],
  stub: ['key'],
  bedrock: [...BEDROCK_FIELDS, 'model_map'],
  vertex: [...VERTEX_FIELDS, 'model_map'],
}
const PROVIDER_FIELDS = ['key', ...BEDROCK_FIELDS, ...VERTEX_FIELDS, 'model_map']

const issue = (path: string, message: string): ValidationIssue => ({ location: 'body', path, message })

function required(provider: ModelProvider, input: Input, fields: readonly (keyof Input)[]): void {
  const missing = fields.filter((f) => input[f] === undefined || input[f] === null)
  if (missing.length) throw validationError(missing.map((f) => issue(f, `required for provider "${provider}"`)))
}

/** The service account key from its object or its JSON text, checked, or a 400 naming what is wrong. */
function serviceAccount(raw: NonNullable<Input['gcp_service_account']>): ServiceAccountKey {
  let value: unknown = raw
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw)
    } catch {
      throw validationError([issue('gcp_service_account', "must be a service account key (its JSON file's text)")])
    }
  }
  const parsed = v.safeParse(ServiceAccountKey, value)
  if (!parsed.success) {
    throw validationError(
      parsed.issues.map((i) => {
        const sub = v.getDotPath(i)
        return issue(sub ? `gcp_service_account.${sub}` : 'gcp_service_account', i.message)
      }),
    )
  }
  try {
    createPrivateKey(parsed.output.private_key)
  } catch {
    throw validationError([issue('gcp_service_account.private_key', 'is not a private key that can be read')])
  }
  return parsed.output
}

/**
 * The record fields a create (`current` null) or update body sets for its provider, with
 * the secrets encrypted; a 400 for a field of another provider, a missing required one,
 * an unreadable service account key or a `token_uri` the address policy refuses.
 *
 * @example
 * ```ts
 * const fields = await providerFields('bedrock', body, null, { cipher, checkUrl })
 * fields.aws_region // 'us-east-1'; fields.key_encrypted holds the secret access key
 * ```
 */
export async function providerFields(
  provider: ModelProvider,
  input: Input,
  current: ProviderRecordFields | null,
  deps: { cipher: Cipher; checkUrl: UrlCheck },
): Promise<Partial<ProviderRecordFields>> {
  const foreign = PROVIDER_FIELDS.filter((f) => input[f as keyof Input] !== undefined && !FIELDS[provider].includes(f))
  if (foreign.length) throw validationError(foreign.map((f) => issue(f, `not a field of provider "${provider}"`)))
  const encrypt = (s: string) => deps.cipher.encrypt(s)
  const out: Partial<ProviderRecordFields> = {}
  if (input.model_map !== undefined) out.model_map = input.model_map
  if (provider === 'bedrock') {
    if (!current) required(provider, input, ['aws_access_key_id', 'aws_secret_access_key', 'aws_region'])
    const newId = input.aws_access_key_id !== undefined && input.aws_access_key_id !== current?.aws_access_key_id
    if (current && newId && input.aws_secret_access_key === undefined)
      throw validationError([issue('aws_secret_access_key', 'a new aws_access_key_id needs its secret access key')])
    if (input.aws_access_key_id !== undefined) out.aws_access_key_id = input.aws_access_key_id
    if (input.aws_region !== undefined) out.aws_region = input.aws_region
    if (input.aws_secret_access_key !== undefined) out.key_encrypted = encrypt(input.aws_secret_access_key)
    if (input.aws_session_token !== undefined)
      out.session_token_encrypted = input.aws_session_token === null ? null : encrypt(input.aws_session_token)
    return out
  }
  if (provider === 'vertex') {
    if (!current) required(provider, input, ['gcp_service_account', 'gcp_region'])
    const sa = input.gcp_service_account === undefined ? null : serviceAccount(input.gcp_service_account)
    if (sa?.token_uri) {
      const issues = await deps.checkUrl(sa.token_uri)
      if (issues.length)
        throw validationError(
          issues.map((i) => ({
            ...i,
            path: 'gcp_service_account.token_uri',
            message: i.message.replace('send webhooks to', 'let model credentials reach'),
          })),
        )
    }
    const project = input.gcp_project_id ?? current?.gcp_project_id ?? sa?.project_id
    if (!project || !/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/.test(project))
      throw validationError([
        issue('gcp_project_id', 'required for provider "vertex" when the service account\'s key names no project'),
      ])
    out.gcp_project_id = project
    if (input.gcp_region !== undefined) out.gcp_region = input.gcp_region
    if (sa) {
      out.key_encrypted = encrypt(JSON.stringify(sa))
      out.gcp_client_email = sa.client_email
    }
    return out
  }
  if (input.key !== undefined) out.key_encrypted = encrypt(input.key)
  return out
}

/** The record's Bedrock credentials in plaintext, or null when it is not a complete Bedrock credential. */
export function bedrockOf(
  r: ProviderRecordFields & { provider: ModelProvider },
  cipher: Cipher,
): BedrockCredential | null {
  if (r.provider !== 'bedrock' || !r.key_encrypted || !r.aws_access_key_id || !r.aws_region) return null
  return {
    access_key_id: r.aws_access_key_id,
    secret_access_key: cipher.decrypt(r.key_encrypted),
    session_token: r.session_token_encrypted ? cipher.decrypt(r.session_token_encrypted) : null,
    region: r.aws_region,
  }
}

/** The record's Vertex credentials in plaintext, or null when it is not a complete Vertex credential. */
export function vertexOf(
  r: ProviderRecordFields & { provider: ModelProvider },
  cipher: Cipher,
): VertexCredential | null {
  if (r.provider !== 'vertex' || !r.key_encrypted || !r.gcp_project_id || !r.gcp_region) return null
  return {
    service_account: JSON.parse(cipher.decrypt(r.key_encrypted)) as ServiceAccountKey,
    project_id: r.gcp_project_id,
    region: r.gcp_region,
  }
}

/** The region a credential's model ids are mapped for (Bedrock's geography; null for other providers). */
export function regionOf(r: ProviderRecordFields & { provider: ModelProvider }): string | null {
  return r.provider === 'bedrock' ? (r.aws_region ?? null) : r.provider === 'vertex' ? (r.gcp_region ?? null) : null
}

/**
 * The model map a credential uses (Berth's defaults for its provider and region under its own `model_map`).
 *
 * @example
 * ```ts
 * modelMapOfRecord({ provider: 'vertex', gcp_region: 'us-east5', key_encrypted: null })['claude-haiku-4-5'] // 'claude-haiku-4-5@20251001'
 * ```
 */
export function modelMapOfRecord(r: ProviderRecordFields & { provider: ModelProvider }): Record<string, string> {
  return modelMapOf(r.provider, regionOf(r), r.model_map ?? null)
}
