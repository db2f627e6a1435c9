import * as v from 'valibot'
import { maxLength } from './length.js'
import { Id, Timestamp } from './common.js'

/** A bot token as the provider issues it: `<bot id>:<secret>`. */
export const BotToken = v.pipe(
  v.string(),
  maxLength(200),
  v.regex(/^\d{1,20}:[A-Za-z0-9_-]{20,150}$/, 'must be a bot token (`<bot id>:<secret>`, as the provider issued it)'),
)

/** Body of `POST /v1/integrations/messenger/setup`. */
export const MessengerSetup = v.strictObject({
  bot_token: BotToken,
})

/** The caller's messenger bot: who it is, where its updates go, which chat it posts to. No token. */
export const MessengerConfig = v.object({
  /** Whether a bot is set up (its integration exists). */
  configured: v.boolean(),
  integration_id: v.nullable(Id('integration')),
  bot: v.nullable(v.object({ id: v.number(), username: v.string(), name: v.string() })),
  webhook: v.nullable(
    v.object({
      /** Where the provider sends the bot's updates. */
      url: v.string(),
      registered_at: Timestamp,
      /** When the last verified update arrived (null: none yet). */
      last_update_at: v.nullable(Timestamp),
    }),
  ),
  claim: v.object({
    /** Whether a chat is bound: playbook results go there. */
    claimed: v.boolean(),
    chat: v.nullable(v.object({ id: v.number(), type: v.string(), title: v.nullable(v.string()) })),
    claimed_at: v.nullable(Timestamp),
    /** When the newest unused claim code expires (null: none pending). */
    pending_code_expires_at: v.nullable(Timestamp),
  }),
})

/** Answer of `POST /v1/integrations/messenger/claim`: a one-time code to send to the bot. */
export const MessengerClaimCode = v.object({
  code: v.string(),
  expires_at: Timestamp,
  bot_username: v.string(),
  instructions: v.string(),
})

/** What the webhook answers the provider once an update is handled (or deliberately ignored). */
export const MessengerWebhookAck = v.object({ ok: v.literal(true) })

/** The `messenger` integration's config fields: the bot comes from setup, the chat from the claim step (a PATCH cannot change them). */
export const MESSENGER_MANAGED_FIELDS = [
  'bot_token',
  'bot_id',
  'bot_username',
  'bot_name',
  'chat_id',
  'chat_type',
  'chat_title',
  'claimed_at',
] as const

export type MessengerSetup = v.InferOutput<typeof MessengerSetup>
export type MessengerConfig = v.InferOutput<typeof MessengerConfig>
export type MessengerClaimCode = v.InferOutput<typeof MessengerClaimCode>
