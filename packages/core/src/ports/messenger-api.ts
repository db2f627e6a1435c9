/**
 * The messenger port (a Telegram-like Bot API): what Berth needs from the provider to run
 * a bot. The server implements it with `fetch` against a configurable base URL
 * (`<base>/bot<token>/<method>`); tests point it at the fake in `@berth/testkit/providers`.
 */

import { ProviderError, type ProviderErrorKinds } from './provider-error.js'

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

/** Why a Bot API call failed: see {@link ProviderErrorKinds}. */
export type MessengerApiErrorKind = ProviderErrorKinds['messenger']

/** The Bot API calls Berth makes, each authenticated by the bot's token. Every method throws {@link ProviderError}. */
export interface MessengerApi {
  getMe(botToken: string): Promise<MessengerBotUser>
  /** Register where updates go, and the secret the provider sends back in `X-Telegram-Bot-Api-Secret-Token`. */
  setWebhook(botToken: string, webhook: { url: string; secret_token: string; allowed_updates: string[] }): Promise<void>
  deleteWebhook(botToken: string): Promise<void>
  /** Post a message (optionally as a reply); answers the sent message's id. */
  sendMessage(
    botToken: string,
    message: { chat_id: number; text: string; reply_to_message_id?: number },
  ): Promise<{ message_id: number }>
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
  throw new ProviderError('messenger', 'unavailable', 'this server has no messenger provider configured')
}
