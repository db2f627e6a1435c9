import type { DeliveryOutcome, Notifier } from '@berth/core'
import type { Channel } from './channel.js'
import { emailChannel, type SmtpOptions } from './email.js'
import { webhookChannel } from './webhook.js'
import type { Resolve } from './address-policy.js'

export { defineChannel, type Channel } from './channel.js'
export { emailChannel, type EmailChannelOptions, type SmtpOptions } from './email.js'
export { webhookChannel, signature, standardSignature, type WebhookChannelOptions } from './webhook.js'
export { isPrivateAddress } from './address-policy.js'
export { chatChannel, chatText, createChatProvider, type ChatProviderConfig } from './chat-provider.js'
export { mailChannel, createMailProvider, type MailProviderConfig } from './mail-provider.js'
export { mailMessage, encodeHeader, type MailMessageInput } from './mail-message.js'

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
 * Core's `Notifier` over one channel per integration type: `webhook` (node's HTTP client,
 * signed, private addresses refused) and `email` (nodemailer). Types without a channel
 * fail their deliveries with the reason.
 *
 * @example
 * ```ts
 * const notifier = createNotifier({ smtp: { host: 'localhost', port: 25, from: 'berth@example.com' } })
 * createServices({ store, cipher, notifier })
 * ```
 */
export function createNotifier(opts: NotifierOptions = {}): Notifier & { close(): void } {
  const channels: Record<string, Channel> = {
    webhook: webhookChannel({
      allowPrivate: opts.allowPrivateWebhooks ?? false,
      ...(opts.timeoutMs !== undefined && { timeoutMs: opts.timeoutMs }),
      ...(opts.resolve && { resolve: opts.resolve }),
    }),
    email: emailChannel({ smtp: opts.smtp, ...(opts.timeoutMs !== undefined && { timeoutMs: opts.timeoutMs }) }),
    ...opts.channels,
  }
  const channelOf = (type: string): Channel | undefined => (Object.hasOwn(channels, type) ? channels[type] : undefined)
  return {
    async check(type, config) {
      return (await channelOf(type)?.check?.(config)) ?? []
    },
    async deliver(target, notification): Promise<DeliveryOutcome> {
      const channel = channelOf(target.type)
      if (!channel) return { ok: false, status: null, error: `this server does not deliver ${target.type} notifications yet`, retryable: false }
      return channel.deliver(target.config, notification)
    },
    close() {
      for (const c of Object.values(channels)) c.close?.()
    },
  }
}
