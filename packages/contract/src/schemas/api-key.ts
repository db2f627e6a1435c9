import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Id, Name, RecordMeta } from './common.js'
import { ModelId } from './profile.js'

/**
 * Model providers: `anthropic` (the Anthropic API, or any Anthropic-compatible endpoint via
 * `base_url`) and `stub` (Berth's built-in offline model: deterministic, no network).
 */
export const ModelProvider = v.picklist(['anthropic', 'stub'])

const BaseUrl = v.pipe(v.string(), v.url(), v.regex(/^https?:\/\//i, 'must be an http(s) URL'), maxLength(2000))
/** A model id or a glob with `*`, e.g. `claude-sonnet-*`. */
const ModelPattern = v.pipe(v.string(), v.regex(/^[a-zA-Z0-9._:@*-]{1,128}$/, 'must be a model id or pattern'))
/** The key itself: write-only, never returned. */
const KeyValue = v.pipe(v.string(), minLength(1), maxLength(4096), v.regex(/^\S+$/, 'must not contain whitespace'))

/** A model credential as returned: never the key itself. */
export const ApiKey = v.object({
  id: Id('apiKey'),
  name: Name,
  provider: ModelProvider,
  base_url: v.nullable(BaseUrl),
  /** Which models this credential may use; `null` means every model of the provider. */
  allowed_models: v.nullable(v.array(ModelPattern)),
  /** Whether a key is stored (the key is write-only). */
  has_key: v.boolean(),
  ...RecordMeta,
})

/** Body of `POST /v1/api-keys`. `key` is required for `anthropic`, optional for `stub`. */
export const CreateApiKey = v.strictObject({
  name: Name,
  provider: ModelProvider,
  key: v.optional(KeyValue),
  base_url: v.optional(v.nullable(BaseUrl)),
  allowed_models: v.optional(v.nullable(v.pipe(v.array(ModelPattern), maxLength(100)))),
})

/** Body of `PATCH /v1/api-keys/:id`. The provider is fixed once created. */
export const UpdateApiKey = v.strictObject({
  name: v.optional(Name),
  key: v.optional(KeyValue),
  base_url: v.optional(v.nullable(BaseUrl)),
  allowed_models: v.optional(v.nullable(v.pipe(v.array(ModelPattern), maxLength(100)))),
})

/** One model a profile can use. */
export const ModelInfo = v.object({
  id: ModelId,
  display_name: v.string(),
  provider: ModelProvider,
  context_window: v.number(),
  max_output_tokens: v.number(),
})

export type ApiKey = v.InferOutput<typeof ApiKey>
export type CreateApiKey = v.InferOutput<typeof CreateApiKey>
export type UpdateApiKey = v.InferOutput<typeof UpdateApiKey>
export type ModelInfo = v.InferOutput<typeof ModelInfo>
export type ModelProvider = v.InferOutput<typeof ModelProvider>
