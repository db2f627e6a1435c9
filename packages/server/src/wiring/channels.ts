/** The integrations side of `createBerth`: the delivery channels by type and the providers behind them. */
import { deriveOAuthStateKey, type Clock, type ServicesOptions } from '@berth/core'
import type { BerthOptions } from '../berth-options.js'
import { createGitProviders } from '../git/providers.js'
import { createBankApi } from '../notifiers/bank-api.js'
import { createChatProvider } from '../notifiers/chat-provider.js'
import { notifierChannels } from '../notifiers/index.js'
import { createMailProvider } from '../notifiers/mail-provider.js'
import { createMessengerApi } from '../notifiers/messenger-api.js'

/** The services' options for integrations and notifications. */
export type IntegrationWiring = Pick<
  ServicesOptions,
  | 'channels'
  | 'notificationRetry'
  | 'gitProviders'
  | 'connectProviders'
  | 'chatSigningSecret'
  | 'bankApi'
  | 'messenger'
  | 'oauthStateKey'
>

/**
 * Build the integrations side from `createBerth`'s options: one channel per integration
 * type the server delivers itself (`webhook`, `email`, and the chat and mail providers'
 * transports when configured; core adds `bankprovider` and `messenger` over the APIs
 * given here), the OAuth providers, and the OAuth state key derived from the encryption key.
 *
 * @example
 * ```ts
 * const wiring = wireIntegrations({ smtp: { host: 'localhost', port: 25, from: 'berth@example.com' } }, { clock, key })
 * createServices({ store, cipher, ...wiring })
 * ```
 */
export function wireIntegrations(options: BerthOptions, ctx: { clock: Clock; key: Uint8Array }): IntegrationWiring {
  const timeout = options.notifications?.timeoutMs !== undefined && { timeoutMs: options.notifications.timeoutMs }
  const providerOpts = { clock: ctx.clock, ...timeout }
  const chatProvider = options.chatProvider && createChatProvider(options.chatProvider, providerOpts)
  const mailProvider = options.mailProvider && createMailProvider(options.mailProvider, providerOpts)
  return {
    channels: notifierChannels({
      allowPrivateWebhooks: options.allowPrivateWebhooks ?? false,
      smtp: options.smtp,
      ...timeout,
      resolve: options.notifications?.resolve,
      channels: {
        ...(chatProvider && { chatprovider: chatProvider.channel }),
        ...(mailProvider && { mailprovider: mailProvider.channel }),
      },
    }),
    notificationRetry: { attempts: options.notifications?.attempts, backoffMs: options.notifications?.backoffMs },
    gitProviders: createGitProviders(options.gitProviders ?? {}, { clock: ctx.clock }),
    connectProviders: {
      ...(chatProvider && { chatprovider: chatProvider.connect }),
      ...(mailProvider && { mailprovider: mailProvider.connect }),
    },
    chatSigningSecret: chatProvider?.signingSecret,
    bankApi: createBankApi(options.bankProvider),
    messenger: { api: createMessengerApi(options.messenger), publicUrl: options.messenger?.publicUrl },
    oauthStateKey: deriveOAuthStateKey(ctx.key),
  }
}
