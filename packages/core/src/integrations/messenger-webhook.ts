import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import * as v from 'valibot'
import { maxLength, ApiError, isApiError, idPattern } from '@berth/contract'
import { parseInput, readJsonBody } from '../internal/input.js'
import { KeyedMutex } from '../internal/mutex.js'
import type { Cipher } from '../ports/cipher.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import { openConfig, sealConfig } from './integration-config.js'
import type { IntegrationRecord, IntegrationsService } from './integrations.js'
import type { MessengerMessage } from '../ports/messenger-api.js'
import { claimCodeIn, type MessengerClaims } from './messenger-claims.js'
import type { MessengerThreads } from './messenger-threads.js'

/** The header the provider sends the webhook's secret token in. */
export const SECRET_TOKEN_HEADER = 'x-telegram-bot-api-secret-token'

/**
 * `messenger-webhooks:<integration>`: the bot's registered webhook: the secret token's
 * SHA-256 (the token itself is never stored), where it points, and update bookkeeping.
 */
export interface WebhookState {
  owner: string
  hash: string
  url: string
  registered_at: string
  last_update_at: string | null
  /** The latest update ids, so a redelivered update is acknowledged without acting twice. */
  recent_updates: number[]
}

/**
 * The secret token registered with the provider: the integration's id (to find the bot
 * with one read) and a random secret, joined by `-` (the provider allows `A-Z a-z 0-9 _ -`).
 *
 * @example
 * ```ts
 * webhookSecretToken('int_abc', 'k3j9…') // 'int_abc-k3j9…'
 * ```
 */
export function webhookSecretToken(integrationId: string, secret: string): string {
  return `${integrationId}-${secret}`
}

/**
 * The SHA-256 of a secret token, hex.
 *
 * @example
 * ```ts
 * secretTokenHash('int_abc-k3j9…') // '5f1c…'
 * ```
 */
export function secretTokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex')
}

/** Compared against when there is no stored hash, so every miss does the same work as a wrong token. */
const DECOY_HASH = randomBytes(32).toString('hex')
const INTEGRATION_ID = idPattern('integration')
const RECENT_UPDATES = 100

const Chat = v.object({
  id: v.pipe(v.number(), v.safeInteger()),
  type: v.pipe(v.string(), maxLength(50)),
  title: v.optional(v.string()),
  username: v.optional(v.string()),
  first_name: v.optional(v.string()),
})
/** The parts of an update Berth reads; everything else is ignored. */
const Update = v.object({
  update_id: v.pipe(v.number(), v.safeInteger()),
  message: v.optional(
    v.object({
      message_id: v.pipe(v.number(), v.safeInteger()),
      chat: Chat,
      text: v.optional(v.pipe(v.string(), maxLength(16_384))),
      reply_to_message: v.optional(
        v.object({ message_id: v.pipe(v.number(), v.safeInteger()), chat: v.optional(Chat) }),
      ),
    }),
  ),
})

export interface MessengerWebhookOptions {
  store: Store
  clock: Clock
  cipher: Cipher
  logger: Logger
  integrations: IntegrationsService
  claims: MessengerClaims
  threads: MessengerThreads
  /** Largest update accepted, in bytes (default 256 KiB). */
  bodyLimit?: number
}

/**
 * `POST /api/messenger/webhook`: updates from the provider. The secret token header is
 * checked first (one store read, one hash, one constant-time comparison whether the bot is
 * unknown or the token wrong): without it the answer is 401 and nothing is read or done.
 * Then, one update at a time per bot: a message carrying a claim code binds its chat to the
 * bot's owner (the code works once; reuse and unknown or expired codes get a reply saying
 * so); in the claimed chat, a reply to a run's message continues the run's session. Every
 * other update is acknowledged and ignored, and a redelivered update is not acted on twice.
 *
 * @example
 * ```ts
 * await webhook.handle(request) // { ok: true }, or 401 UNAUTHORIZED
 * ```
 */
export class MessengerWebhook {
  private readonly lock = new KeyedMutex()
  private readonly bodyLimit: number

  constructor(private readonly o: MessengerWebhookOptions) {
    this.bodyLimit = o.bodyLimit ?? 256 * 1024
  }

  async handle(request: Request): Promise<{ ok: true }> {
    const given = request.headers.get(SECRET_TOKEN_HEADER) ?? ''
    const id = given.slice(0, Math.max(0, given.indexOf('-')))
    const state = INTEGRATION_ID.test(id) ? await this.o.store.get<WebhookState>(`messenger-webhooks:${id}`) : null
    const match = timingSafeEqual(
      Buffer.from(secretTokenHash(given), 'hex'),
      Buffer.from(state?.hash ?? DECOY_HASH, 'hex'),
    )
    if (!match || !state) throw unauthorized()
    const record = await this.o.integrations.records.find(state.owner, id)
    if (record?.type !== 'messenger') {
      // The bot was disconnected: its token no longer opens anything.
      await this.o.store.remove(`messenger-webhooks:${id}`)
      throw unauthorized()
    }
    const update = parseInput('body', Update, await readJsonBody(request, this.bodyLimit))
    await this.lock
      .run(id, () => this.dispatch(state.owner, id, update))
      .catch((err: unknown) => {
        // Acknowledged all the same: redelivering the update would only meet the same failure.
        const fields = {
          integration: id,
          update: update.update_id,
          error: err instanceof Error ? err.message : String(err),
        }
        if (isApiError(err)) this.o.logger.warn('messenger update not handled', fields)
        else this.o.logger.error('messenger update not handled', fields)
      })
    return { ok: true }
  }

  private async dispatch(owner: string, id: string, update: v.InferOutput<typeof Update>): Promise<void> {
    const key = `messenger-webhooks:${id}`
    const state = await this.o.store.get<WebhookState>(key)
    if (!state || state.recent_updates.includes(update.update_id)) return
    await this.o.store.set<WebhookState>(key, {
      ...state,
      last_update_at: isoNow(this.o.clock),
      recent_updates: [...state.recent_updates.slice(-(RECENT_UPDATES - 1)), update.update_id],
    })
    const message = update.message as MessengerMessage | undefined
    const record = await this.o.integrations.records.find(owner, id)
    if (!message?.text || !record) return
    const config = openConfig(record.config, this.o.cipher)
    const token = config.bot_token
    if (typeof token !== 'string') return
    const code = claimCodeIn(message.text)
    if (code) return this.claim(owner, record, token, message, code)
    if (config.chat_id === message.chat.id) await this.o.threads.onReply(owner, id, token, message)
  }

  /** A claim code arrived: bind the chat, or say why not. */
  private async claim(
    owner: string,
    record: IntegrationRecord,
    token: string,
    message: MessengerMessage,
    code: string,
  ): Promise<void> {
    const { outcome, owner: codeOwner } = await this.o.claims.consume(record.id, code)
    const chatId = message.chat.id
    if (outcome === 'used') {
      await this.o.threads.say(
        token,
        chatId,
        'This claim code was already used. Ask Berth for a new one.',
        message.message_id,
      )
      return
    }
    if (outcome !== 'claimed' || codeOwner !== owner) {
      await this.o.threads.say(
        token,
        chatId,
        'This claim code is not valid or has expired. Ask Berth for a new one.',
        message.message_id,
      )
      return
    }
    const chat = message.chat
    const bound = await this.o.integrations.mutate(owner, record.id, (r) => {
      const config = {
        ...openConfig(r.config, this.o.cipher),
        chat_id: chatId,
        chat_type: chat.type,
        chat_title: chat.title ?? chat.username ?? chat.first_name ?? null,
        claimed_at: isoNow(this.o.clock),
      }
      return { ...r, config: sealConfig(config, this.o.cipher) }
    })
    if (!bound) return
    this.o.logger.info('messenger chat claimed', { integration: record.id, chat_type: chat.type })
    await this.o.threads.say(
      token,
      chatId,
      'This chat is now connected to Berth. Playbook results will be posted here; reply to one to continue its run.',
      message.message_id,
    )
  }
}

function unauthorized(): ApiError {
  return new ApiError('UNAUTHORIZED', `Missing or wrong ${SECRET_TOKEN_HEADER} header`)
}
