import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Id, Name, RecordMeta } from './common.js'
import { ModelId } from './profile.js'

/**
 * Model providers: `anthropic` (the Anthropic API, or any Anthropic-compatible endpoint via
 * `base_url`), `bedrock` (Amazon Bedrock, signed with an AWS access key), `vertex` (Google
 * Vertex AI, with a service account's key) and `stub` (Berth's built-in offline model:
 * deterministic, no network). The model gateway holds the credential of the first three.
 */
export const ModelProvider = v.picklist(['anthropic', 'bedrock', 'vertex', 'stub'])

const BaseUrl = v.pipe(v.string(), v.url(), v.regex(/^https?:\/\//i, 'must be an http(s) URL'), maxLength(2000))
/** A model id or a glob with `*`, e.g. `claude-sonnet-*`. */
const ModelPattern = v.pipe(v.string(), v.regex(/^[a-zA-Z0-9._:@*-]{1,128}$/, 'must be a model id or pattern'))
/** The key itself: write-only, never returned. */
const KeyValue = v.pipe(v.string(), minLength(1), maxLength(4096), v.regex(/^\S+$/, 'must not contain whitespace'))

/** An AWS access key id (`AKIA…`, or `ASIA…` with a session token): not secret, returned. */
const AwsAccessKeyId = v.pipe(v.string(), v.regex(/^[A-Z0-9]{16,128}$/, 'must be an AWS access key id'))
/** An AWS session token (temporary credentials): write-only. */
const AwsSessionToken = v.pipe(
  v.string(),
  minLength(1),
  maxLength(8192),
  v.regex(/^\S+$/, 'must not contain whitespace'),
)
/** An AWS region, e.g. `us-east-1`, `eu-central-1`, `us-gov-west-1`. */
const AwsRegion = v.pipe(v.string(), v.regex(/^[a-z]{2}(-[a-z]+)+-\d{1,2}$/, 'must be an AWS region, e.g. us-east-1'))
/** A Google Cloud project id. */
const GcpProjectId = v.pipe(v.string(), v.regex(/^[a-z][a-z0-9-]{4,28}[a-z0-9]$/, 'must be a Google Cloud project id'))
/** A Vertex AI location: a region (`us-east5`, `europe-west1`) or `global`. */
const GcpRegion = v.pipe(v.string(), v.regex(/^[a-z]+(-[a-z0-9]+)*$/, 'must be a Vertex AI region, e.g. us-east5'))

/**
 * A Google service account's JSON key, as the Cloud console downloads it. Berth reads
 * `client_email`, `private_key`, `private_key_id`, `token_uri` and `project_id`; other
 * fields are kept with it. Write-only.
 */
export const ServiceAccountKey = v.looseObject({
  type: v.literal('service_account', 'must be "service_account"'),
  client_email: v.pipe(v.string(), v.email(), maxLength(320)),
  private_key: v.pipe(
    v.string(),
    maxLength(16384),
    v.regex(/-----BEGIN (RSA )?PRIVATE KEY-----/, 'must be a PEM private key'),
  ),
  private_key_id: v.optional(v.pipe(v.string(), maxLength(200))),
  /** Where access tokens are minted (default `https://oauth2.googleapis.com/token`). */
  token_uri: v.optional(BaseUrl),
  project_id: v.optional(v.pipe(v.string(), maxLength(200))),
})

/** The key as an object, or as the text of its JSON file. */
const ServiceAccountInput = v.union(
  [ServiceAccountKey, v.pipe(v.string(), minLength(2), maxLength(32768))],
  'must be a service account key (an object, or its JSON text)',
)

/**
 * Model ids as a profile names them (`claude-sonnet-4-5`) → the provider's own id for the
 * same model (a Bedrock model or inference profile id or ARN, a Vertex model id). Laid over
 * Berth's defaults for the provider (docs/CREDENTIALS.md).
 */
const ModelMap = v.pipe(
  v.record(ModelId, v.pipe(v.string(), v.regex(/^[a-zA-Z0-9._:@/-]{1,256}$/, 'must be a provider model id or ARN'))),
  v.check((m) => Object.keys(m).length <= 100, 'at most 100 models'),
)

/** A model credential as returned: never the key, the AWS secret, the session token or the service account's key. */
export const ApiKey = v.object({
  id: Id('apiKey'),
  name: Name,
  provider: ModelProvider,
  base_url: v.nullable(BaseUrl),
  /** Which models this credential may use; `null` means every model of the provider. */
  allowed_models: v.nullable(v.array(ModelPattern)),
  /** Whether the secret is stored: the key, the AWS secret access key or the service account's key (all write-only). */
  has_key: v.boolean(),
  /** `bedrock`: the access key id the gateway signs with. */
  aws_access_key_id: v.nullable(v.string()),
  /** `bedrock`: the region the gateway signs for and reaches. */
  aws_region: v.nullable(v.string()),
  /** `bedrock`: whether a session token is stored (temporary credentials). */
  has_session_token: v.boolean(),
  /** `vertex`: the service account the gateway mints tokens for. */
  gcp_client_email: v.nullable(v.string()),
  gcp_project_id: v.nullable(v.string()),
  gcp_region: v.nullable(v.string()),
  /** Overrides of Berth's model ids for this provider (`bedrock`, `vertex`); null: the defaults. */
  model_map: v.nullable(v.record(v.string(), v.string())),
  ...RecordMeta,
})

const CloudFields = {
  base_url: v.optional(v.nullable(BaseUrl)),
  allowed_models: v.optional(v.nullable(v.pipe(v.array(ModelPattern), maxLength(100)))),
  aws_access_key_id: v.optional(AwsAccessKeyId),
  aws_secret_access_key: v.optional(KeyValue),
  aws_session_token: v.optional(v.nullable(AwsSessionToken)),
  aws_region: v.optional(AwsRegion),
  gcp_service_account: v.optional(ServiceAccountInput),
  gcp_project_id: v.optional(GcpProjectId),
  gcp_region: v.optional(GcpRegion),
  model_map: v.optional(v.nullable(ModelMap)),
}

/**
 * Body of `POST /v1/api-keys`. `anthropic` needs `key`; `bedrock` needs `aws_access_key_id`,
 * `aws_secret_access_key` and `aws_region` (`aws_session_token` with temporary credentials);
 * `vertex` needs `gcp_service_account` and `gcp_region` (`gcp_project_id` defaults to the
 * key's). Fields of another provider are refused.
 */
export const CreateApiKey = v.strictObject({
  name: Name,
  provider: ModelProvider,
  key: v.optional(KeyValue),
  ...CloudFields,
})

/** Body of `PATCH /v1/api-keys/:id`. The provider is fixed once created; its secrets can be replaced. */
export const UpdateApiKey = v.strictObject({
  name: v.optional(Name),
  key: v.optional(KeyValue),
  ...CloudFields,
})

/** One model a profile can use. */
export const ModelInfo = v.object({
  id: ModelId,
  display_name: v.string(),
  provider: ModelProvider,
  context_window: v.number(),
  max_output_tokens: v.number(),
  /** `bedrock`, `vertex`: the id the provider knows the model by (the credential's `model_map` or Berth's default). */
  provider_model_id: v.optional(v.string()),
})

export type ApiKey = v.InferOutput<typeof ApiKey>
export type CreateApiKey = v.InferOutput<typeof CreateApiKey>
export type UpdateApiKey = v.InferOutput<typeof UpdateApiKey>
export type ModelInfo = v.InferOutput<typeof ModelInfo>
export type ModelProvider = v.InferOutput<typeof ModelProvider>
export type ServiceAccountKey = v.InferOutput<typeof ServiceAccountKey>
