/**
 * The channel port: how one integration type delivers a notification, and the one registry
 * (by type) every delivery goes through — notifications, integration tests, and the
 * connect-flow types (chat, mail, banking, messenger).
 *
 * **How to add a channel.** Write one file that exports `defineChannel((opts) => ({ deliver,
 * check?, close? }))`: `deliver(config, notification, integration)` makes one attempt and
 * never throws (every failure is a {@link DeliveryOutcome}: `retryable` for 5xx, 429,
 * timeouts and connection errors; `unauthorized` when the provider refuses an OAuth grant's
 * token; no secret of `config` in `error`, even one the provider echoes back). Name the type
 * in `IntegrationType` (`schemas/integration.ts`) with its config schema in `CONFIG_SCHEMAS`
 * (`integrations/integration-config.ts`), pass the channel to `createServices({ channels:
 * { <type>: yourChannel(opts) } })` (the server does this in `server/src/wiring/channels.ts`),
 * and run `channelConformanceSuite` from `@berth/testkit` against it with a local fake of
 * the third party (see `server/test/channels.test.ts`). A channel that needs core's own
 * records (messenger threads, banking token checks) is registered by its service
 * in `createServices`; one that wraps a deployment's transport (OAuth token refresh around
 * the chat and mail providers) uses {@link ChannelRegistry.wrap}.
 */
import type { ValidationIssue } from '@berth/contract'
import type { DeliveryOutcome, NotificationTarget, Notifier, OutgoingNotification } from './notifier.js'

/** The integration a delivery is for, for channels that keep state per integration. */
export type ChannelIntegration = Omit<NotificationTarget, 'config'>

/** How one integration type delivers (a webhook POST, an SMTP mail, a provider API call). */
export interface Channel {
  /** Checks of a config that need the outside world (issues name `config.<field>`). */
  check?(config: Record<string, unknown>): Promise<ValidationIssue[]>
  /**
   * One attempt with the integration's decrypted config; never throws. The registry always
   * passes the integration; a channel that keeps state per integration fails without it.
   */
  deliver(
    config: Record<string, unknown>,
    notification: OutgoingNotification,
    integration?: ChannelIntegration,
  ): Promise<DeliveryOutcome>
  /** Release connections. */
  close?(): void
}

/**
 * Define a channel (a factory per pluggable thing, like unstorage's `defineDriver`).
 *
 * @example
 * ```ts
 * const log = defineChannel(() => ({ deliver: async (_config, n) => (console.log(n.body), { ok: true, status: null }) }))
 * createServices({ store, cipher, channels: { log: log({}) } })
 * ```
 */
export function defineChannel<O>(factory: (opts: O) => Channel): (opts: O) => Channel {
  return factory
}

/**
 * The channels of a deployment by integration type. It is core's {@link Notifier}: a type
 * without a channel fails its deliveries with the reason (or goes to the `fallback`
 * notifier it was built over).
 */
export interface ChannelRegistry extends Notifier {
  /** Add the channel of a type that has none yet (throws when it has one). */
  register(type: string, channel: Channel): void
  /** Replace a type's channel by one built around it (the current one, the fallback's, or one that cannot deliver). */
  wrap(type: string, around: (inner: Channel) => Channel): void
  /** The channel of a type, if any. */
  get(type: string): Channel | undefined
  /** The types with a channel. */
  types(): string[]
  check(type: string, config: Record<string, unknown>): Promise<ValidationIssue[]>
  /** Close every channel ever registered (wrapped ones included), once. */
  close(): void
}

/**
 * The failure of a channel that keeps state per integration, called without one.
 *
 * @example
 * ```ts
 * if (!integration) return withoutIntegration('messenger')
 * ```
 */
export function withoutIntegration(type: string): DeliveryOutcome {
  return {
    ok: false,
    status: null,
    error: `a ${type} delivery needs its integration (deliver through the channel registry)`,
    retryable: false,
  }
}

/** A whole notifier as the channel of one type. */
function notifierChannel(notifier: Notifier, type: string): Channel {
  return {
    check: notifier.check && ((config: Record<string, unknown>) => notifier.check!(type, config)),
    deliver: async (config, n, integration) =>
      integration ? notifier.deliver({ ...integration, type, config }, n) : withoutIntegration(type),
  }
}

/** The channel of a type nobody delivers. */
const undeliverable = (type: string): Channel => ({
  deliver: async () => ({
    ok: false,
    status: null,
    error: `this server cannot deliver ${type} notifications`,
    retryable: false,
  }),
})

/**
 * A registry over the given channels; types without one go to `fallback` when given.
 *
 * @example
 * ```ts
 * const channels = createChannelRegistry({ webhook: webhookChannel({ allowPrivate: false }) })
 * channels.register('log', log({}))
 * await channels.deliver({ id: 'int_1', owner_id: 'usr_1', type: 'log', config: {} }, notification)
 * ```
 */
export function createChannelRegistry(initial: Record<string, Channel> = {}, fallback?: Notifier): ChannelRegistry {
  const byType = new Map<string, Channel>(Object.entries(initial))
  const all = new Set<Channel>(byType.values())
  const current = (type: string): Channel | undefined =>
    byType.get(type) ?? (fallback && notifierChannel(fallback, type))
  return {
    register(type, channel) {
      if (byType.has(type)) throw new Error(`a ${type} channel is registered already`)
      byType.set(type, channel)
      all.add(channel)
    },
    wrap(type, around) {
      const channel = around(current(type) ?? undeliverable(type))
      byType.set(type, channel)
      all.add(channel)
    },
    get: (type) => byType.get(type),
    types: () => [...byType.keys()],
    async check(type, config) {
      return (await current(type)?.check?.(config)) ?? []
    },
    deliver(target, n) {
      const { config, ...integration } = target
      return (current(target.type) ?? undeliverable(target.type)).deliver(config, n, integration)
    },
    close() {
      for (const c of all) c.close?.()
      all.clear()
    },
  }
}
