/** The notifier port: what a delivery attempt carries and how it went. */
import type { ValidationIssue } from '@berth/contract'

/** An integration as a notifier sees it: its type and its config with secrets decrypted. */
export interface NotificationTarget {
  id: string
  owner_id: string
  type: string
  config: Record<string, unknown>
}

/** One attempt at delivering one notification. */
export interface OutgoingNotification {
  /** Shared by every attempt of the same notification (receivers deduplicate on it). */
  notification_id: string
  /** E.g. `task.completed`, `playbook_run.failed`, `integration.test`. */
  event: string
  /** The payload `{ event, task | run, at }`. */
  payload: Record<string, unknown>
  /** The payload as sent: the exact bytes a webhook signature covers. */
  body: string
  /** Unix seconds, from the server's clock (`X-Berth-Timestamp`). */
  timestamp: number
  /** 1 for the first try. */
  attempt: number
}

/** How an attempt went. `retryable` failures (5xx, timeouts, connection errors) are tried again. */
export type DeliveryOutcome =
  | { ok: true; status: number | null }
  | {
      ok: false
      status: number | null
      error: string
      retryable: boolean
      /**
       * The provider refused the grant's access token (expired early, or revoked): an
       * OAuth-connected integration refreshes it and tries once more, or needs reconnecting.
       */
      unauthorized?: boolean
    }

/**
 * Delivers notifications to third parties by integration type. Core decides what to send,
 * when and how often; the notifier only knows how. `createServices` builds one: the
 * channel registry (`ports/channel.ts`), one channel per type.
 */
export interface Notifier {
  /**
   * Checks of a config beyond its shape that need the outside world (e.g. a webhook URL
   * that resolves to a private address). Issues name `config.<field>`.
   */
  check?(type: string, config: Record<string, unknown>): Promise<ValidationIssue[]>
  /** One attempt. Must not throw: every failure is an outcome. */
  deliver(target: NotificationTarget, notification: OutgoingNotification): Promise<DeliveryOutcome>
}

/**
 * The notifier of a deployment that configured none: every delivery fails, untried.
 *
 * @example
 * ```ts
 * const services = createServices({ store, cipher, notifier: unconfiguredNotifier })
 * ```
 */
export const unconfiguredNotifier: Notifier = {
  deliver: async (target) => ({
    ok: false,
    status: null,
    error: `this server cannot deliver ${target.type} notifications`,
    retryable: false,
  }),
}
