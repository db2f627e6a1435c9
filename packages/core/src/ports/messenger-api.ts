/**
 * The messenger port (a Telegram-like Bot API): what Berth needs from the provider to run
 * a bot. The server implements it with `fetch` against a configurable base URL
 * (`<base>/bot<token>/<method>`); tests point it at the fake in `@berth/testkit/providers`.
 */

/** The bot itself (`getMe`). */
export interface MessengerBotUser {
  id: number
  username: string
  first_name: string
}

/** A chat as updates carry it. */
export interface MessengerChat {
  id: number
  /** `private`, `group`, `supergroup` or `channel`. */
  type: string
  title?: string
  username?: string
  first_name?: string
}

/** A message as updates carry it (the fields Berth reads). */
export interface MessengerMessage {
  message_id: number
  chat: MessengerChat
  from?: { id: number; is_bot?: boolean; username?: string; first_name?: string }
  date?: number
  text?: string
  reply_to_message?: MessengerMessage
}

/** One incoming update (the webhook's body). */
export interface MessengerUpdate {
  update_id: number
  message?: MessengerMessage
}

/**
 * Why a Bot API call failed:
 * - `unauthorized`: the bot token was refused (`error_code` 401, or 404 for a malformed one);
 * - `unavailable`: the provider could not be reached, timed out, or answered 5xx/429 or something unusable;
 * - `rejected`: the provider refused the request itself (another 4xx, e.g. `chat not found`).
 */
export type MessengerApiErrorKind = 'unauthorized' | 'unavailable' | 'rejected'

/**
 * A failed Bot API call, with the provider's `error_code` and `description` when it sent them.
 *
 * @example
 * ```ts
 * throw new MessengerApiError('rejected', 'Bad Request: chat not found', { status: 400 })
 * ```
 */
export class MessengerApiError extends Error {
  readonly kind: MessengerApiErrorKind
  readonly status: number | null

  constructor(kind: MessengerApiErrorKind, message: string, extra: { status?: number | null } = {}) {
    super(message)
    this.name = 'MessengerApiError'
    this.kind = kind
    this.status = extra.status ?? null
  }
}

/**
 * True for a {@link MessengerApiError} (also across module copies).
 *
 * @example
 * ```ts
 * try { await api.getMe(token) } catch (err) { if (isMessengerApiError(err) && err.kind === 'unauthorized') badToken() }
 * ```
 */
export function isMessengerApiError(value: unknown): value is MessengerApiError {
  return value instanceof MessengerApiError || (typeof value === 'object' && value !== null && (value as { name?: unknown }).name === 'MessengerApiError')
}

/** The Bot API calls Berth makes, each authenticated by the bot's token. Every method throws {@link MessengerApiError}. */
export interface MessengerApi {
  getMe(botToken: string): Promise<MessengerBotUser>
  /** Register where updates go, and the secret the provider sends back in `X-Telegram-Bot-Api-Secret-Token`. */
  setWebhook(botToken: string, webhook: { url: string; secret_token: string; allowed_updates: string[] }): Promise<void>
  deleteWebhook(botToken: string): Promise<void>
  /** Post a message (optionally as a reply); answers the sent message's id. */
  sendMessage(botToken: string, message: { chat_id: number; text: string; reply_to_message_id?: number }): Promise<{ message_id: number }>
}

/**
 * The Bot API of a deployment that configured none: every call fails, untried.
 *
 * @example
 * ```ts
 * createServices({ store, cipher, messenger: { api: unconfiguredMessengerApi } })
 * ```
 */
export const unconfiguredMessengerApi: MessengerApi = {
  getMe: unavailable,
  setWebhook: unavailable,
  deleteWebhook: unavailable,
  sendMessage: unavailable,
}

async function unavailable(): Promise<never> {
  throw new MessengerApiError('unavailable', 'this server has no messenger provider configured')
}
