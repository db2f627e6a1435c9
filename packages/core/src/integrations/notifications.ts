import { ApiError, newId, type Delivery, type PlaybookRun, type Task } from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import { secondsFrom, type Metrics } from '../ports/metrics.js'
import type { Logger } from '../ports/logger.js'
import type { DeliveryOutcome, NotificationTarget, Notifier } from '../ports/notifier.js'
import type { DeliveryLog } from './deliveries.js'
import type { EventBus, TaskBusMessage } from '../tasks/event-bus.js'
import type { IntegrationsService } from './integrations.js'
import type { Store } from '../ports/store.js'
import type { Coordination, OnceKeys } from '../coordination/port.js'

export interface NotificationsOptions {
  /** Where retries wait (`notification-retries:*`), so a restart resumes them. */
  store: Store
  clock: Clock
  logger: Logger
  bus: EventBus
  integrations: IntegrationsService
  deliveries: DeliveryLog
  notifier: Notifier
  /** Where each attempt is counted by channel and outcome (default none). */
  metrics?: Metrics
  /** Tries per notification, the first included (default 5). */
  attempts?: number
  /** Wait before the first retry; doubled for each next one (default 1 s). */
  backoffMs?: number
  /**
   * Shared by several instances: retries wait as its delayed jobs, so each attempt is made
   * by one instance once (default: this process's timers).
   */
  sharedBy?: Coordination | undefined
  /** Where each shared attempt is claimed (default `sharedBy.once`; a durable one survives a flush). */
  once?: OnceKeys | undefined
}

/** A permission request a notification asks a person to decide (event `task.permission_request`). */
export interface ApprovalNotice {
  task_id: string
  request_id: string
  tool: string
  input: unknown
}

/** What a notification is about: a task, a playbook run, a permission request, or nothing (a test). */
export type NotificationSubject =
  | { task: Task }
  | { run: PlaybookRun }
  | { approval: ApprovalNotice }
  | Record<string, never>

interface Pending {
  notification_id: string
  event: string
  payload: Record<string, unknown>
  body: string
}

/** A retry that waits: stored until it is made, so it survives a restart. */
interface StoredRetry {
  owner_id: string
  integration_id: string
  notification: Pending
  attempt: number
  /** When it is due, in the clock's milliseconds. */
  due: number
}

const RETRIES = 'notification-retries:'
/** The delayed-job queue of retries when instances share them. */
const RETRY_QUEUE = 'notification-retries'

/**
 * Notifications: when a task completes or fails, when its agent asks for a permission
 * (`task.permission_request`), and when a playbook run ends, every
 * enabled integration of the owner whose scope covers the task's profile gets
 * `{ event, task | run, at }`. Deliveries run in the background: a failing integration
 * never fails the task. Each attempt is recorded; 5xx answers, timeouts and connection
 * errors are retried with exponential backoff up to `attempts` tries. Tasks of playbook
 * runs notify once, as the run (`playbook_run.*`), not also as a task.
 *
 * Retries are stored until they are made: after a restart, `recover()` schedules the ones
 * still waiting (each keeps its notification id, so receivers deduplicate). With a shared
 * coordination (`sharedBy`), retries wait as its delayed jobs: every instance may recover
 * them, and each attempt is still made once, by one instance.
 *
 * @example
 * ```ts
 * const notifications = new NotificationsService({ clock, logger, bus, integrations, deliveries, notifier })
 * await notifications.test('usr_1', 'int_1') // one delivery now, or 502 BAD_GATEWAY
 * ```
 */
export class NotificationsService {
  private readonly timers = new Set<ReturnType<typeof setTimeout>>()
  private readonly inflight = new Set<Promise<unknown>>()
  private closed = false
  private readonly attempts: number
  private readonly backoffMs: number
  private processing: Promise<() => Promise<void>> | undefined

  constructor(private readonly o: NotificationsOptions) {
    this.attempts = Math.max(1, o.attempts ?? 5)
    this.backoffMs = o.backoffMs ?? 1000
    o.bus.subscribeAll((m) => this.onTaskMessage(m))
  }

  private onTaskMessage(m: TaskBusMessage): void {
    // A tool call waiting for a person: where a channel can carry it (the messenger), a reply decides it.
    if (m.type === 'task.event' && m.event.type === 'permission_request' && m.owner_id && m.profile_id) {
      // A stored event keeps the runner's fields: a permission_request carries these.
      const { request_id, tool, input } = m.event as unknown as Omit<ApprovalNotice, 'task_id'>
      const approval: ApprovalNotice = { task_id: m.task_id, request_id, tool, input }
      this.track(this.notify(m.owner_id, m.profile_id, 'task.permission_request', { approval }))
      return
    }
    if (m.type !== 'task.status' || (m.status !== 'completed' && m.status !== 'failed')) return
    if (m.task.session_id?.startsWith('pb-')) return
    this.track(this.notify(m.owner_id, m.task.profile_id, `task.${m.status}`, { task: m.task }))
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p)
    void p.finally(() => this.inflight.delete(p)).catch(() => {})
    return p
  }

  private pending(event: string, subject: NotificationSubject): Pending {
    const payload = { event, ...subject, at: isoNow(this.o.clock) }
    return { notification_id: newId('notification'), event, payload, body: JSON.stringify(payload) }
  }

  /**
   * Send `event` to every enabled integration of `owner` in scope of `profileId`, in the
   * background with retries. Never throws.
   */
  async notify(owner: string, profileId: string, event: string, subject: NotificationSubject): Promise<void> {
    if (this.closed) return
    try {
      const targets = await this.o.integrations.targetsFor(owner, profileId)
      await Promise.all(targets.map((t) => this.attempt(t, this.pending(event, subject), 1, true)))
    } catch (err) {
      this.o.logger.warn('notification failed', { event, error: err instanceof Error ? err.message : String(err) })
    }
  }

  /**
   * Send a test notification through one integration now, once: the recorded delivery, or
   * 502 BAD_GATEWAY with it in `details.delivery` when the third party failed.
   */
  async test(owner: string, integrationId: string): Promise<Delivery> {
    const target = await this.o.integrations.targetOf(owner, integrationId)
    const delivery = await this.track(this.attempt(target, this.pending('integration.test', {}), 1, false))
    if (delivery.status === 'failed') {
      throw new ApiError(
        'BAD_GATEWAY',
        `The ${target.type} integration did not accept the test notification: ${delivery.error}`,
        { delivery },
      )
    }
    return delivery
  }

  /** One attempt: deliver, record, schedule the next one when it may help. */
  private async attempt(target: NotificationTarget, n: Pending, attempt: number, retry: boolean): Promise<Delivery> {
    const started = performance.now()
    let outcome: DeliveryOutcome
    try {
      outcome = await this.o.notifier.deliver(target, {
        ...n,
        timestamp: Math.floor(this.o.clock.now() / 1000),
        attempt,
      })
    } catch (err) {
      outcome = { ok: false, status: null, error: err instanceof Error ? err.message : String(err), retryable: false }
    }
    this.o.metrics?.delivery({
      channel: target.type,
      outcome: outcome.ok ? 'succeeded' : 'failed',
      seconds: secondsFrom(started),
    })
    const willRetry = retry && !outcome.ok && outcome.retryable && attempt < this.attempts && !this.closed
    const delivery = await this.o.deliveries.record(target.owner_id, {
      integration_id: target.id,
      notification_id: n.notification_id,
      event: n.event,
      attempt,
      status: outcome.ok ? 'succeeded' : 'failed',
      response_status: outcome.status,
      error: outcome.ok ? null : outcome.error.slice(0, 500),
      will_retry: willRetry,
      duration_ms: Math.round(performance.now() - started),
      at: isoNow(this.o.clock),
    })
    if (willRetry) {
      const retry: StoredRetry = {
        owner_id: target.owner_id,
        integration_id: target.id,
        notification: n,
        attempt: attempt + 1,
        due: this.o.clock.now() + this.backoffMs * 2 ** (attempt - 1),
      }
      await this.o.store.set(`${RETRIES}${retryId(retry)}`, retry)
      this.schedule(retry)
    } else if (!outcome.ok && retry) {
      this.o.logger.warn('notification not delivered', {
        integration: target.id,
        type: target.type,
        event: n.event,
        attempt,
        error: outcome.error.slice(0, 200),
      })
    }
    return delivery
  }

  /** Make a stored retry when it is due (at once when overdue). */
  private schedule(r: StoredRetry): void {
    if (this.closed) return
    const shared = this.o.sharedBy
    if (shared) {
      // One delayed job per attempt: scheduling it again (another instance's recover) is ignored.
      const id = `${retryId(r)}:${r.attempt}`
      // `due` is on this service's clock; the backend's jobs run on the wall clock.
      const runAt = Date.now() + Math.max(0, r.due - this.o.clock.now())
      const queued = this.startProcessing(shared).then(() => shared.delayed.schedule(RETRY_QUEUE, id, runAt, r))
      this.track(queued).catch((err) =>
        this.o.logger.warn('notification retry not scheduled', { integration: r.integration_id, error: String(err) }),
      )
      return
    }
    const timer = setTimeout(
      () => {
        this.timers.delete(timer)
        if (this.closed) return
        this.track(this.retry(r)).catch((err) =>
          this.o.logger.warn('notification retry failed', { integration: r.integration_id, error: String(err) }),
        )
      },
      Math.max(0, r.due - this.o.clock.now()),
    )
    timer.unref?.()
    this.timers.add(timer)
  }

  /** Make a retry that is due: drop its stored record, then attempt with the integration as it is now. */
  private async retry(r: StoredRetry): Promise<void> {
    await this.o.store.remove(`${RETRIES}${retryId(r)}`)
    // Read again: the integration may have been deleted, disabled or reconfigured meanwhile.
    const fresh = await this.o.integrations.enabledTarget(r.owner_id, r.integration_id)
    if (fresh) await this.attempt(fresh, r.notification, r.attempt, true)
  }

  /** Take this instance's share of the shared retries (once). */
  private startProcessing(shared: Coordination): Promise<() => Promise<void>> {
    this.processing ??= shared.delayed.process<StoredRetry>(RETRY_QUEUE, async (job) => {
      if (this.closed) return
      // A job is run by one instance, but a recover() racing its end could schedule it
      // again: the claim makes each attempt once.
      const once = this.o.once ?? shared.once
      if (!(await once.claimOnce(`notification-attempt:${job.id}`, 24 * 3_600_000))) return
      await this.track(this.retry(job.payload))
    })
    return this.processing
  }

  /** After a restart: schedule the retries a previous run left waiting. */
  async recover(): Promise<void> {
    if (this.o.sharedBy) await this.startProcessing(this.o.sharedBy)
    const keys = await this.o.store.keys(RETRIES)
    for (const r of await this.o.store.getMany<StoredRetry>(keys)) if (r) this.schedule(r)
  }

  /**
   * Schedule again the stored retries the shared backend may have lost (it was flushed or
   * replaced): every one, or those overdue by more than `olderThanMs` (a loss nobody
   * noticed). An attempt already made is not made again: its claim is refused. Without a
   * shared coordination the retries are this process's timers, and nothing is lost: 0.
   */
  async rebuild(opts: { olderThanMs?: number } = {}): Promise<number> {
    const shared = this.o.sharedBy
    if (!shared || this.closed) return 0
    await this.startProcessing(shared)
    const keys = await this.o.store.keys(RETRIES)
    const now = this.o.clock.now()
    let n = 0
    for (const r of await this.o.store.getMany<StoredRetry>(keys)) {
      if (!r || (opts.olderThanMs !== undefined && r.due > now - opts.olderThanMs)) continue
      this.schedule(r)
      n++
    }
    return n
  }

  /** Stop retrying and wait for the attempts under way. */
  async close(): Promise<void> {
    this.closed = true
    for (const t of this.timers) clearTimeout(t)
    this.timers.clear()
    const stop = await this.processing?.catch(() => undefined)
    await stop?.()
    await Promise.allSettled([...this.inflight])
  }
}

/** A retry's key: its notification and integration. */
function retryId(r: Pick<StoredRetry, 'notification' | 'integration_id'>): string {
  return `${r.notification.notification_id}:${r.integration_id}`
}
