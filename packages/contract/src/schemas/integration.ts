import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { Id, PageQuery, ProfileIds, RecordMeta, Scope, Timestamp } from './common.js'

/**
 * Integration types. `webhook` and `email` are created with `POST /v1/integrations`; the
 * chat, mail, messenger and banking types come from their own connect flows.
 */
export const IntegrationType = v.picklist([
  'webhook',
  'email',
  'chatprovider',
  'mailprovider',
  'messenger',
  'bankprovider',
])

/**
 * Whether an integration can deliver: `needs_reconnect` once the provider revoked the grant
 * of an OAuth-connected one (connect it again); `connected` otherwise.
 */
export const IntegrationStatus = v.picklist(['connected', 'needs_reconnect'])

/** The types `POST /v1/integrations` creates. */
export const DIRECT_INTEGRATION_TYPES = ['webhook', 'email'] as const

/** Config fields that hold credentials: encrypted at rest and masked in every response. */
export const SECRET_CONFIG_FIELDS = ['bot_token', 'refresh_token', 'access_token', 'api_key', 'secret'] as const

/** What a secret config field reads in responses. Sending it back in a PATCH keeps the stored value. */
export const SECRET_MASK = '••••••••'

/** An integration's configuration: type-specific fields (see `WebhookConfig`, `EmailConfig`). */
export const IntegrationConfig = v.pipe(
  v.record(v.pipe(v.string(), maxLength(100)), v.unknown()),
  v.check((c) => Object.keys(c).length <= 50, 'at most 50 fields'),
)

function parseUrl(u: string): URL | null {
  try {
    return new URL(u)
  } catch {
    return null
  }
}

/** `webhook` config: where to POST, and an optional secret for the HMAC signature. */
export const WebhookConfig = v.strictObject({
  url: v.pipe(
    v.string(),
    maxLength(2048),
    v.url('must be an absolute URL'),
    // Checks still run after a failed one, so each parses defensively.
    v.check((u) => /^https?:$/i.test(parseUrl(u)?.protocol ?? ''), 'must be an http or https URL'),
    v.check((u) => !parseUrl(u)?.username && !parseUrl(u)?.password, 'must not carry credentials'),
  ),
  secret: v.optional(v.pipe(v.string(), minLength(1, 'must not be empty'), maxLength(512))),
})

/** `email` config: who receives the notification mails (sent through the deployment's SMTP server). */
export const EmailConfig = v.strictObject({
  recipients: v.pipe(
    v.array(v.pipe(v.string(), maxLength(254), v.email('must be an email address'))),
    minLength(1, 'needs at least one recipient'),
    maxLength(20),
  ),
})

/** An integration as returned: secret config fields read `••••••••`. */
export const Integration = v.object({
  id: Id('integration'),
  type: IntegrationType,
  config: v.record(v.string(), v.unknown()),
  enabled: v.boolean(),
  /** The default integration of its type (at most one per type). */
  is_default: v.boolean(),
  status: IntegrationStatus,
  scope: Scope,
  profile_ids: v.array(Id('profile')),
  ...RecordMeta,
})

/** Body of `POST /v1/integrations`. */
export const CreateIntegration = v.strictObject({
  type: IntegrationType,
  config: IntegrationConfig,
  enabled: v.optional(v.boolean()),
  is_default: v.optional(v.boolean()),
  scope: v.optional(Scope),
  profile_ids: v.optional(ProfileIds),
})

/** Body of `PATCH /v1/integrations/:id`. `config` replaces the stored one; a masked field keeps its value. */
export const UpdateIntegration = v.strictObject({
  config: v.optional(IntegrationConfig),
  enabled: v.optional(v.boolean()),
  is_default: v.optional(v.boolean()),
  scope: v.optional(Scope),
  profile_ids: v.optional(ProfileIds),
})

export const IntegrationListQuery = v.object({
  ...PageQuery,
  type: v.optional(IntegrationType),
})

/** One delivery attempt of a notification through an integration. */
export const Delivery = v.object({
  id: Id('delivery'),
  integration_id: Id('integration'),
  /** The notification this attempt delivers; retries share it (also sent as `X-Berth-Delivery`). */
  notification_id: Id('notification'),
  event: v.string(),
  /** 1 for the first try, then 2, 3, ... */
  attempt: v.pipe(v.number(), v.integer()),
  status: v.picklist(['succeeded', 'failed']),
  /** The receiver's HTTP status (webhooks) or SMTP reply code (email), when it answered. */
  response_status: v.nullable(v.number()),
  error: v.nullable(v.string()),
  /** Whether another attempt is scheduled after this failed one. */
  will_retry: v.boolean(),
  duration_ms: v.number(),
  at: Timestamp,
})

export const DeliveryListQuery = v.object({ ...PageQuery })

export type IntegrationType = v.InferOutput<typeof IntegrationType>
export type IntegrationStatus = v.InferOutput<typeof IntegrationStatus>
export type Integration = v.InferOutput<typeof Integration>
export type CreateIntegration = v.InferOutput<typeof CreateIntegration>
export type UpdateIntegration = v.InferOutput<typeof UpdateIntegration>
export type Delivery = v.InferOutput<typeof Delivery>
