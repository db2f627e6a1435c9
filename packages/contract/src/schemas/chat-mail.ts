import * as v from 'valibot'
import { maxLength, minLength } from './length.js'
import { PageQuery, Timestamp } from './common.js'
import { ReturnPath } from './oauth-return-path.js'

/** The integration types connected by OAuth: the chat-workspace provider and the mail provider. */
export const CONNECT_TYPES = ['chatprovider', 'mailprovider'] as const

/** `chatprovider` or `mailprovider`. */
export type ConnectType = (typeof CONNECT_TYPES)[number]

/** Query of `GET /v1/integrations/{chatprovider,mailprovider}/authorize`. */
export const ConnectAuthorizeQuery = v.object({ returnPath: v.optional(ReturnPath, '/') })

/** Answer of the authorize routes. */
export const ConnectAuthorizeResponse = v.object({
  /** The provider's consent URL (with `state`, and a PKCE challenge where supported): send the browser there. */
  url: v.string(),
})

/** Query the provider sends to `/api/{chatprovider,mailprovider}/callback`: `code` and `state`, or `error`. */
export const ConnectCallbackQuery = v.object({
  code: v.optional(v.pipe(v.string(), minLength(1), maxLength(2048))),
  state: v.pipe(v.string(), minLength(1), maxLength(1024)),
  error: v.optional(v.pipe(v.string(), maxLength(200))),
  error_description: v.optional(v.pipe(v.string(), maxLength(2000))),
})

/** A channel to post to: the provider's channel id (`C0123ABC`) or a name (`#alerts`). */
export const ChatChannel = v.pipe(v.string(), v.regex(/^#?[A-Za-z0-9][\w.-]{0,79}$/, 'must be a channel id or #name'))

const Email = v.pipe(v.string(), maxLength(254), v.email('must be an email address'))

/**
 * Fields of an OAuth integration's config that the connect flow owns (the account, the
 * tokens and their expiry): a PATCH keeps their stored values whatever it sends.
 */
const TokenFields = {
  access_token: v.optional(v.string()),
  refresh_token: v.optional(v.nullable(v.string())),
  /** When the access token expires (refreshed before use), or null. */
  expires_at: v.optional(v.nullable(v.string())),
  scopes: v.optional(v.array(v.string())),
}

/** `chatprovider` config: `channel` is yours to set (PATCH); the rest comes from the connect flow. */
export const ChatProviderConfig = v.strictObject({
  /** Where notifications are posted; null until you choose one. */
  channel: v.optional(v.nullable(ChatChannel)),
  team_id: v.optional(v.string()),
  team_name: v.optional(v.string()),
  bot_user_id: v.optional(v.string()),
  ...TokenFields,
})

/** `mailprovider` config: `recipients` is yours to set (default: the connected mailbox); the rest comes from the connect flow. */
export const MailProviderConfig = v.strictObject({
  recipients: v.pipe(v.array(Email), minLength(1, 'needs at least one recipient'), maxLength(20)),
  /** The connected mailbox: notifications are sent from it. */
  email: v.optional(v.string()),
  /** The provider's stable account id. */
  account_id: v.optional(v.string()),
  ...TokenFields,
})

const TOKEN_FIELDS = ['access_token', 'refresh_token', 'expires_at', 'scopes'] as const

/** Config fields the connect flow owns, per type. */
export const CONNECT_MANAGED_FIELDS: Record<ConnectType, readonly string[]> = {
  chatprovider: ['team_id', 'team_name', 'bot_user_id', ...TOKEN_FIELDS],
  mailprovider: ['email', 'account_id', ...TOKEN_FIELDS],
}

/** An event the chat provider sent for an integration's workspace (recorded, newest first). */
export const ChatEvent = v.object({
  /** The provider's event id (retries of one event are recorded once). */
  event_id: v.string(),
  /** E.g. `app_mention`, `message`. */
  type: v.string(),
  subtype: v.nullable(v.string()),
  channel: v.nullable(v.string()),
  user: v.nullable(v.string()),
  /** The message text (up to 4,000 characters). */
  text: v.nullable(v.string()),
  /** Whether the message mentions the integration's bot user. */
  mentions_bot: v.boolean(),
  event_time: v.nullable(Timestamp),
  received_at: Timestamp,
})

/** Query of `GET /v1/integrations/:id/events`. */
export const ChatEventListQuery = v.object({ ...PageQuery })

/** Answer of `POST /api/chatprovider/events`: the `url_verification` challenge echoed, or an acknowledgement. */
export const ChatEventAck = v.union([
  v.object({ challenge: v.string() }),
  v.object({ ok: v.literal(true), recorded: v.pipe(v.number(), v.integer()) }),
])

export type ChatEvent = v.InferOutput<typeof ChatEvent>
export type ChatEventAck = v.InferOutput<typeof ChatEventAck>
