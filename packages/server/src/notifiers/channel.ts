import type { DeliveryOutcome, OutgoingNotification, ValidationIssue } from '@berth/core'

/** How one integration type delivers: the server's half of core's `Notifier` port. */
export interface Channel {
  /** Checks of a config that need the outside world (issues name `config.<field>`). */
  check?(config: Record<string, unknown>): Promise<ValidationIssue[]>
  /** One attempt; never throws. */
  deliver(config: Record<string, unknown>, notification: OutgoingNotification): Promise<DeliveryOutcome>
  /** Release connections. */
  close?(): void
}

/**
 * Define a channel (a factory per pluggable thing, like unstorage's `defineDriver`).
 *
 * @example
 * ```ts
 * const log = defineChannel(() => ({ deliver: async (_config, n) => (console.log(n.body), { ok: true, status: null }) }))
 * ```
 */
export function defineChannel<O>(factory: (opts: O) => Channel): (opts: O) => Channel {
  return factory
}
