/** The shapes of the fake messenger Bot API (`startFakeMessenger`): bots, chats, messages, webhooks, deliveries and its handle. */
/** Options of `startFakeMessenger`. */
export interface FakeMessengerOptions {
  host?: string
  port?: number
}

/** A bot registered with the fake (as the provider's bot father would issue it). */
export interface FakeBot {
  id: number
  username: string
  first_name: string
  /** `<id>:<secret>`, as the provider issues tokens. */
  token: string
}

/** A chat as updates carry it. */
export interface FakeChat {
  id: number
  type: 'private' | 'group' | 'supergroup'
  title?: string
  username?: string
  first_name?: string
}

/** A message as the Bot API shapes it. */
export interface FakeMessage {
  message_id: number
  from: { id: number; is_bot: boolean; first_name: string; username?: string }
  chat: FakeChat
  date: number
  text: string
  reply_to_message?: FakeMessage
}

/** A message a bot sent (`sendMessage`). */
export interface FakeSentMessage {
  bot_id: number
  chat_id: number
  message_id: number
  text: string
  /** The message it replies to, if any. */
  reply_to_message_id: number | null
}

/** A bot's registered webhook (`setWebhook`). */
export interface FakeWebhook {
  url: string
  secret_token: string | null
  allowed_updates: string[]
}

/** One Bot API request the fake received (the token is not kept). */
export interface FakeMessengerRequest {
  /** The Bot API method, e.g. `sendMessage`. */
  method: string
  /** The HTTP status the fake answered (null while hanging). */
  status: number | null
}

/** How the fake misbehaves: answer every Bot API request with this 5xx, or never answer. */
export type FakeMessengerFailure = { status: number } | 'hang' | null

/** What delivering an update to a webhook gave. */
export interface FakeDelivery {
  /** The webhook's HTTP status. */
  status: number
  /** The webhook's answer, as text. */
  body: string
  update: { update_id: number; message: FakeMessage }
}

/** A running fake messenger. */
export interface FakeMessenger {
  /** Bot API base URL, e.g. `http://127.0.0.1:43123` (for `createBerth({ messenger: { apiBaseUrl } })`). */
  url: string
  /** Register a bot; its token works from now on. */
  createBot(opts?: { username?: string; first_name?: string }): FakeBot
  /** A new chat: a private one with a user by default. */
  chat(opts?: Partial<FakeChat>): FakeChat
  /** The bot's registered webhook, or null. */
  webhookOf(token: string): FakeWebhook | null
  /** Every message the bots sent, oldest first. */
  sent: FakeSentMessage[]
  /** Every Bot API request, oldest first. */
  requests: FakeMessengerRequest[]
  /**
   * A user writes `text` in `chat` to the bot (optionally as a reply to message `replyTo`):
   * the update is delivered to the bot's webhook the way the provider does it, with the
   * registered secret in `X-Telegram-Bot-Api-Secret-Token` (`secretToken` overrides it;
   * `null` leaves the header out).
   */
  sendUpdate(
    token: string,
    message: { chat: FakeChat; text: string; replyTo?: number },
    opts?: { secretToken?: string | null },
  ): Promise<FakeDelivery>
  /** Deliver an update again (as the provider does when the webhook did not answer 2xx). */
  redeliver(
    token: string,
    update: FakeDelivery['update'],
    opts?: { secretToken?: string | null },
  ): Promise<FakeDelivery>
  /** Make every Bot API request fail with a 5xx, or hang (`'hang'`), until set back to `null`. */
  fail(mode: FakeMessengerFailure): void
  close(): Promise<void>
}
