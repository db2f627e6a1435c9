import type { RateDecision } from '../limits/rate-limit.js'

/** Queue order: `high` before `normal` before `low`; FIFO (with owner fairness) within one. */
export type JobPriority = 'high' | 'normal' | 'low'

/** A job to put on a queue. */
export interface NewJob<P = unknown> {
  /** Unique within the queue while the job exists (a task id); a second add is ignored. */
  id: string
  /** Whose job it is: an owner with fewer jobs in the queue goes first within a priority. */
  owner: string
  priority?: JobPriority
  /** JSON-serialisable data. */
  payload: P
}

/** A job a worker took: it stays leased to this instance until `ack` or `fail`. */
export interface TakenJob<P = unknown> extends Required<NewJob<P>> {
  /** 1 on the first take; more when an earlier taker died or the job was retried. */
  deliveries: number
  /** The lease's token (driver-specific; pass the job back as it is). */
  token: string
}

/** Jobs per state in one queue. */
export interface QueueCounts {
  /** Ready to take, including retries whose delay has passed. */
  waiting: number
  /** Taken and not yet acked or failed. */
  active: number
  /** Put back with a delay that has not passed. */
  delayed: number
}

/**
 * A named job queue shared by every instance. Jobs are taken by priority, then by owner
 * fairness (an owner's n-th job in the queue goes after every owner's (n-1)-th), then in
 * the order they were added. A taken job stays leased to the instance while it lives (the
 * driver renews the lease); when the instance dies, the job is handed out again once its
 * lease expires, with `deliveries` one higher.
 */
export interface JobQueue<P = unknown> {
  readonly name: string
  /** Add a job; false when a job with this id is already in the queue. */
  add(job: NewJob<P>): Promise<boolean>
  /** Take the next job, or null when none is ready (never waits). */
  take(): Promise<TakenJob<P> | null>
  /** The job is done: it leaves the queue. False when this instance had lost its lease. */
  ack(job: TakenJob<P>): Promise<boolean>
  /**
   * The job could not be done. Without `retryInMs` it leaves the queue; with it, it goes back:
   * 0 ready at once, in front of its priority (it keeps its turn); >0 after that delay, behind
   * the jobs of its priority. False when this instance had lost its lease.
   */
  fail(job: TakenJob<P>, opts?: { retryInMs?: number }): Promise<boolean>
  /** Remove a job that is waiting or delayed (not one being worked on); false when none. */
  cancel(id: string): Promise<boolean>
  counts(): Promise<QueueCounts>
}

/** A held slot of a counting semaphore. */
export interface SlotLease {
  key: string
  holder: string
  /** Epoch ms when the lease lapses unless renewed (on the driver's clock). */
  expiresAt: number
}

/**
 * Counting semaphores with leases: at most `limit` holders of a key at once, counted over
 * every instance. A holder that dies without releasing stops counting after its ttl.
 */
export interface Slots {
  /**
   * Take a slot of `key` for `holder` for `ttlMs`, or null when `limit` are held. A holder
   * that already has one gets it renewed (idempotent, like today's `ConcurrencySlots`).
   */
  acquire(key: string, limit: number, holder: string, ttlMs: number): Promise<SlotLease | null>
  /** Extend a lease to `ttlMs` from now; null when it had lapsed or was released. */
  renew(lease: SlotLease, ttlMs: number): Promise<SlotLease | null>
  release(lease: Pick<SlotLease, 'key' | 'holder'>): Promise<void>
  /** Live holders of `key`. */
  count(key: string): Promise<number>
  holders(key: string): Promise<string[]>
}

/** A token bucket's settings: `burst` at once, refilled continuously at `rpm` per minute. */
export interface RateSettings {
  rpm: number
  burst: number
}

/** Token buckets per key, shared by every instance (the semantics of core's `tokenBucket`). */
export interface RateBuckets {
  /** Take one token from `key`'s bucket: the decision carries what the RateLimit headers need. */
  take(key: string, settings: RateSettings): Promise<RateDecision>
}

/** Keys that exist once across every instance, for a while. */
export interface OnceKeys {
  /** True for the first caller of `key` within `ttlMs` (an OAuth state, a nonce); false after. */
  claimOnce(key: string, ttlMs: number): Promise<boolean>
  /** Store `value` under `key` unless it exists: null when stored, else the value already there. */
  setIfAbsent(key: string, value: string, ttlMs: number): Promise<string | null>
  get(key: string): Promise<string | null>
  /** Forget a key (a claim that must be retryable after a failure). */
  delete(key: string): Promise<void>
}

/** Fan-out of JSON messages to every instance's subscribers. */
export interface PubSub {
  /** Deliver `message` to every subscriber of `channel` on every instance (at most once each). */
  publish<M = unknown>(channel: string, message: M): Promise<void>
  /**
   * Receive the messages published on `channel` after this resolves, in publish order (per
   * publishing instance), once each. Resolves to the unsubscribe function.
   */
  subscribe<M = unknown>(channel: string, handler: (message: M) => void): Promise<() => Promise<void>>
}

/** A delayed job handed to a processor. */
export interface DueJob<P = unknown> {
  id: string
  queue: string
  runAt: number
  payload: P
}

/** Jobs that run once, at a time, on one of the instances processing their queue. */
export interface DelayedJobs {
  /** Run `payload` at `runAt` (epoch ms); a second schedule of a pending id is ignored. */
  schedule<P = unknown>(queue: string, id: string, runAt: number, payload: P): Promise<void>
  /** Drop a pending job; false when it is not pending (unknown, running or done). */
  cancel(queue: string, id: string): Promise<boolean>
  /**
   * Process `queue` on this instance: each due job goes to exactly one processing instance.
   * A handler that throws ends the job (reschedule it yourself to retry). Resolves to stop().
   */
  process<P = unknown>(queue: string, handler: (job: DueJob<P>) => Promise<void>): Promise<() => Promise<void>>
}

/** Which instances are alive: each renews its heartbeat lease while it runs. */
export interface Instances {
  /** Ids of the instances whose heartbeat lease has not lapsed (this one included). */
  alive(): Promise<string[]>
}

/** Whether this instance reaches the shared backend, and whether it still holds its heartbeat lease. */
export interface CoordinationState {
  /** False while calls cannot reach the backend: they fail within a bounded time with {@link CoordinationUnavailableError}. */
  reachable: boolean
  /**
   * True while this instance's heartbeat lease is held as far as it can tell (its last renewal
   * plus the lease, less a safety margin, is still ahead). False: other instances may take its
   * tasks over, so it must stop driving them (fenced) until it is leased again.
   */
  leased: boolean
  /** Epoch ms (this instance's clock) of the last change. */
  since: number
}

/** A change of {@link CoordinationState}; `reset` when the backend came back without the shared state it had (flushed, replaced, restarted empty). */
export interface CoordinationChange extends CoordinationState {
  reset: boolean
}

/** Thrown (or rejected with) by coordination calls while the backend is unreachable. */
export class CoordinationUnavailableError extends Error {
  constructor(message = 'coordination backend unreachable', options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'CoordinationUnavailableError'
  }
}

/**
 * What several Berth instances share to behave as one: job queues, concurrency slots, rate
 * buckets, single-use keys, pub/sub and delayed jobs, plus instance liveness. Every method
 * is async; a driver (`memory` for one process, `redis` for several) implements it and
 * passes `coordinationConformanceSuite` from `@berth/testkit`.
 */
export interface Coordination {
  /** The driver's name (`memory`, `redis`). */
  readonly driver: string
  /** This instance's id (unique among live instances). */
  readonly instanceId: string
  queue<P = unknown>(name: string): JobQueue<P>
  readonly slots: Slots
  readonly rates: RateBuckets
  readonly once: OnceKeys
  readonly pubsub: PubSub
  readonly delayed: DelayedJobs
  readonly instances: Instances
  /** The backend's reachability and this instance's lease, now (no I/O). */
  state(): CoordinationState
  /** Told of every change of {@link state} (and of a backend reset); returns the unsubscribe function. */
  onStateChange(handler: (change: CoordinationChange) => void): () => void
  /**
   * Stop this instance: heartbeats, lease renewals, subscriptions and processors end.
   * Jobs it holds are not handed back: they return to their queue when their lease lapses,
   * as when the instance dies (fail them with `retryInMs: 0` first to hand them back now).
   */
  close(): Promise<void>
}
