import type { OnceKeys } from '../coordination/port.js'
import {
  ApiError,
  validationError,
  newId,
  randomToken,
  type MessengerClaimCode,
  type MessengerConfig,
} from '@berth/contract'
import { KeyedMutex } from '../internal/mutex.js'
import type { Cipher } from '../ports/cipher.js'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { Channel } from '../ports/channel.js'
import type { Store } from '../ports/store.js'
import type { EventBus } from '../tasks/event-bus.js'
import { openConfig, sealConfig } from './integration-config.js'
import type { IntegrationRecord, IntegrationsService } from './integrations.js'
import type { MessengerApi, MessengerBotUser } from '../ports/messenger-api.js'
import { isProviderError } from '../ports/provider-error.js'
import { MessengerClaims } from './messenger-claims.js'
import { MessengerThreads } from './messenger-threads.js'
import { MessengerWebhook, secretTokenHash, webhookSecretToken, type WebhookState } from './messenger-webhook.js'
import type { PlaybooksService } from '../playbooks/playbooks.js'
import type { TasksService } from '../tasks/service.js'
import type { WorkspacesService } from '../workspaces/workspaces.js'

/** The path the provider delivers updates to (on `publicUrl`). */
export const MESSENGER_WEBHOOK_PATH = '/api/messenger/webhook'

export interface MessengerOptions {
  store: Store
  clock: Clock
  cipher: Cipher
  logger: Logger
  api: MessengerApi
  /** Where the provider reaches this server, e.g. `https://berth.example.com`; default: the setup request's origin. */
  publicUrl?: string | undefined
  bus: EventBus
  tasks: TasksService
  workspaces: WorkspacesService
  playbooks: PlaybooksService
  integrations: IntegrationsService
  /** Where posting a follow-up's result is claimed, so of several instances one posts it. */
  once?: OnceKeys
}

/** `messenger-bots:<owner>`: the caller's bot (one per caller). */
interface BotRef {
  integration_id: string
}

/**
 * The messenger bot (Telegram-like), one per caller. Setup validates the bot token with
 * the provider (`getMe`), registers this server's webhook with a generated secret token
 * (`setWebhook`) and stores a `messenger` integration whose `bot_token` is encrypted at
 * rest and masked in every response; setting up again replaces the token and the secret
 * (a different bot starts unclaimed). The claim step binds a chat: the caller gets a
 * one-time code, the user sends it to the bot, the webhook binds that chat. Notifications
 * then go to the chat, and replies continue playbook runs (see {@link MessengerThreads}).
 *
 * @example
 * ```ts
 * await messenger.setup(caller.id, { bot_token: '123456:AA…' }, 'https://berth.example.com')
 * const { code } = await messenger.claim(caller.id) // the user sends `code` to the bot
 * ```
 */
export class MessengerService {
  readonly claims: MessengerClaims
  readonly threads: MessengerThreads
  readonly webhook: MessengerWebhook
  private readonly lock = new KeyedMutex()

  constructor(private readonly o: MessengerOptions) {
    this.claims = new MessengerClaims(o.store, o.clock)
    this.threads = new MessengerThreads({
      store: o.store,
      logger: o.logger,
      api: o.api,
      bus: o.bus,
      tasks: o.tasks,
      workspaces: o.workspaces,
      playbooks: o.playbooks,
      integrations: o.integrations,
      once: o.once,
    })
    this.webhook = new MessengerWebhook({
      store: o.store,
      clock: o.clock,
      cipher: o.cipher,
      logger: o.logger,
      integrations: o.integrations,
      claims: this.claims,
      threads: this.threads,
    })
  }

  /** The caller's bot integration, or null. */
  private async current(owner: string): Promise<IntegrationRecord | null> {
    const ref = await this.o.store.get<BotRef>(`messenger-bots:${owner}`)
    const record = ref ? await this.o.integrations.records.find(owner, ref.integration_id) : null
    return record?.type === 'messenger' ? record : null
  }

  /** A provider call during setup: a refused token is the caller's 400, anything else a 502. */
  private async provider<T>(step: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call()
    } catch (err) {
      if (!isProviderError(err, 'messenger')) throw err
      if (err.kind === 'unauthorized')
        throw validationError([
          {
            location: 'body',
            path: 'bot_token',
            message: `the messenger provider refused this bot token (${err.message.slice(0, 200)})`,
          },
        ])
      throw new ApiError('BAD_GATEWAY', `The messenger provider failed at ${step}: ${err.message}`.slice(0, 500), {
        provider: 'messenger',
        step,
        reason: err.kind,
        provider_status: err.status,
      })
    }
  }

  /** Validate the token, register the webhook, store the integration; nothing is stored when the provider refuses. */
  async setup(owner: string, input: { bot_token: string }, origin: string): Promise<MessengerConfig> {
    const token = input.bot_token
    const bot: MessengerBotUser = await this.provider('getMe', () => this.o.api.getMe(token))
    const url = `${(this.o.publicUrl ?? origin).replace(/\/+$/, '')}${MESSENGER_WEBHOOK_PATH}`
    return this.lock.run(owner, async () => {
      const existing = await this.current(owner)
      const id = existing?.id ?? newId('integration')
      const secretToken = webhookSecretToken(id, randomToken(64))
      await this.provider('setWebhook', () =>
        this.o.api.setWebhook(token, { url, secret_token: secretToken, allowed_updates: ['message'] }),
      )
      const now = isoNow(this.o.clock)
      const old = existing ? openConfig(existing.config, this.o.cipher) : null
      const sameBot = old?.bot_id === bot.id
      if (old && !sameBot && typeof old.bot_token === 'string') {
        // The caller switched bots: the old one stops sending here.
        await this.o.api
          .deleteWebhook(old.bot_token)
          .catch((err: unknown) =>
            this.o.logger.warn('could not remove the previous bot’s webhook', { error: String(err) }),
          )
      }
      const config = {
        bot_token: token,
        bot_id: bot.id,
        bot_username: bot.username,
        bot_name: bot.first_name,
        chat_id: sameBot ? (old?.chat_id ?? null) : null,
        chat_type: sameBot ? (old?.chat_type ?? null) : null,
        chat_title: sameBot ? (old?.chat_title ?? null) : null,
        claimed_at: sameBot ? (old?.claimed_at ?? null) : null,
      }
      const sealed = sealConfig(config, this.o.cipher)
      const updated =
        existing &&
        (await this.o.integrations.reconnect(owner, id, (r) => ({ ...r, config: sealed, status: 'connected' })))
      if (!updated) {
        await this.o.integrations.insert({
          id,
          owner_id: owner,
          type: 'messenger',
          config: sealed,
          enabled: true,
          is_default: false,
          scope: 'all',
          profile_ids: [],
          created_at: now,
          updated_at: now,
        })
      }
      if (!sameBot) await this.claims.sweep(id, true)
      await this.o.store.set<WebhookState>(`messenger-webhooks:${id}`, {
        owner,
        hash: secretTokenHash(secretToken),
        url,
        registered_at: now,
        last_update_at: null,
        recent_updates: [],
      })
      await this.o.store.set<BotRef>(`messenger-bots:${owner}`, { integration_id: id })
      return this.config(owner)
    })
  }

  /** The caller's bot, webhook and claim state (never the token). */
  async config(owner: string): Promise<MessengerConfig> {
    const record = await this.current(owner)
    const state = record && (await this.o.store.get<WebhookState>(`messenger-webhooks:${record.id}`))
    if (!record)
      return {
        configured: false,
        integration_id: null,
        bot: null,
        webhook: null,
        claim: { claimed: false, chat: null, claimed_at: null, pending_code_expires_at: null },
      }
    const c = record.config
    const pending = await this.claims.pendingUntil(record.id)
    const chatId = typeof c.chat_id === 'number' ? c.chat_id : null
    return {
      configured: true,
      integration_id: record.id,
      bot: { id: Number(c.bot_id), username: String(c.bot_username ?? ''), name: String(c.bot_name ?? '') },
      webhook: state
        ? { url: state.url, registered_at: state.registered_at, last_update_at: state.last_update_at }
        : null,
      claim: {
        claimed: chatId !== null,
        chat:
          chatId !== null
            ? {
                id: chatId,
                type: String(c.chat_type ?? 'private'),
                title: typeof c.chat_title === 'string' ? c.chat_title : null,
              }
            : null,
        claimed_at: typeof c.claimed_at === 'string' ? c.claimed_at : null,
        pending_code_expires_at: pending !== null ? new Date(pending).toISOString() : null,
      },
    }
  }

  /** A one-time claim code for the caller's bot; 404 when no bot is set up. */
  async claim(owner: string): Promise<MessengerClaimCode> {
    const record = await this.current(owner)
    if (!record)
      throw new ApiError('NOT_FOUND', 'No messenger bot is set up: POST /v1/integrations/messenger/setup first')
    const { code, expires_at } = await this.claims.issue(owner, record.id)
    const username = String(record.config.bot_username ?? '')
    return {
      code,
      expires_at: new Date(expires_at).toISOString(),
      bot_username: username,
      instructions: `Send ${code} to @${username} from the chat that should receive Berth's results (a private chat or a group the bot is in). The code works once and expires in 10 minutes.`,
    }
  }

  /** The `messenger` channel: posts to the claimed chat (see {@link MessengerThreads.deliver}). */
  readonly channel: Channel = { deliver: (config, n, integration) => this.threads.deliver(config, n, integration) }

  /** The integration was disconnected: stop the provider's webhook and forget its state. */
  async disconnected(record: IntegrationRecord): Promise<void> {
    const token = openConfig(record.config, this.o.cipher).bot_token
    if (typeof token === 'string')
      await this.o.api
        .deleteWebhook(token)
        .catch((err: unknown) => this.o.logger.warn('could not remove the bot’s webhook', { error: String(err) }))
    await this.o.store.remove(`messenger-webhooks:${record.id}`)
    await this.claims.sweep(record.id, true)
    await this.threads.forget(record.id)
    const ref = await this.o.store.get<BotRef>(`messenger-bots:${record.owner_id}`)
    if (ref?.integration_id === record.id) await this.o.store.remove(`messenger-bots:${record.owner_id}`)
  }

  /** After a restart (see {@link MessengerThreads.recover}). */
  recover(): Promise<void> {
    return this.threads.recover()
  }

  close(): Promise<void> {
    return this.threads.close()
  }
}
