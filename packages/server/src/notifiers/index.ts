/** The server's delivery channels (webhook, email, chat and mail provider transports) and the notifier over them. */
import { createChannelRegistry, type Channel, type ChannelRegistry } from '@berth/core'
import { emailChannel, type SmtpOptions } from './email.js'
import { webhookChannel } from './webhook.js'
import type { Resolve } from './address-policy.js'

export { defineChannel, type Channel } from '@berth/core'
export { emailChannel, type EmailChannelOptions, type SmtpOptions } from './email.js'
export { webhookChannel, signature, standardSignature, type WebhookChannelOptions } from './webhook.js'
export { isPrivateAddress } from './address-policy.js'
export { chatChannel, chatText, createChatProvider, type ChatProviderConfig } from './chat-provider.js'
export { mailChannel, createMailProvider, type MailProviderConfig } from './mail-provider.js'
export { mailMessage, type MailMessageInput } from './mail-message.js'

export interface NotifierOptions {
  /** Let webhooks reach private, loopback and link-local addresses (default false). */
  allowPrivateWebhooks?: boolean
  /** The SMTP server email integrations send through. */
  smtp?: SmtpOptions | undefined
  /** Per attempt (default 10 s). */
  timeoutMs?: number
  /** How webhook hosts resolve (default: the system resolver); tests answer from a table. */
  resolve?: Resolve
  /** More channels by integration type (e.g. the chat provider's), or replacements. */
  channels?: Record<string, Channel>
}

/**
 * The server's channels by integration type: `webhook` (node's HTTP client, signed, private
 * addresses refused), `email` (nodemailer), and `opts.channels` on top.
 *
 * @example
 * ```ts
 * createServices({ store, cipher, channels: notifierChannels({ smtp: { host: 'localhost', port: 25, from: 'berth@example.com' } }) })
 * ```
 */
export function notifierChannels(opts: NotifierOptions = {}): Record<string, Channel> {
  const timeout = opts.timeoutMs !== undefined && { timeoutMs: opts.timeoutMs }
  return {
    webhook: webhookChannel({ allowPrivate: opts.allowPrivateWebhooks ?? false, ...timeout, resolve: opts.resolve }),
    email: emailChannel({ smtp: opts.smtp, ...timeout }),
    ...opts.channels,
  }
}

/**
 * Core's `Notifier` over {@link notifierChannels}: a channel registry. Types without a
 * channel fail their deliveries with the reason.
 *
 * @example
 * ```ts
 * const notifier = createNotifier({ smtp: { host: 'localhost', port: 25, from: 'berth@example.com' } })
 * await notifier.deliver({ id: 'int_1', owner_id: 'usr_1', type: 'email', config: { recipients: ['ops@example.com'] } }, notification)
 * ```
 */
export function createNotifier(opts: NotifierOptions = {}): ChannelRegistry {
  return createChannelRegistry(notifierChannels(opts))
}
