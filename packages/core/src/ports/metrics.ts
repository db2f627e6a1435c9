/**
 * The metrics port: named observations core makes on the task path, with no metrics library
 * behind it. The server's Prometheus implementation turns them into counters, gauges and
 * histograms. Labels are bounded by construction: route names (never paths), modes,
 * statuses, error codes, providers, models, channels and outcomes; never an id, a prompt or
 * a secret.
 */
import type { PoolStats, TaskStatus } from '@berth/contract'

/** A task's mode, as a label. */
type TaskMode = 'batch' | 'session'

/** The tokens and cost of one model answer. */
export interface ModelUsageObservation {
  provider: string
  model: string
  input_tokens: number
  output_tokens: number
  cache_read_tokens: number
  cache_write_tokens: number
  cost_usd: number
}

/** Idle warm sessions: how many, and the memory caps their containers reserve against the host's memory budget. */
export interface IdleSessionsStats {
  sessions: number
  memoryBytes: number
  /** Of those sessions, the ones whose agent lives on between tasks (Claude Code up, its background work running). */
  livingAgents: number
}

/** What core observes; each method is called where it happens and must never throw. */
export interface Metrics {
  /** A request answered: its route's name (`unmatched` when none), method, status and latency. */
  requestEnded(r: { route: string; method: string; status: number; seconds: number }): void
  /** A task left the queue to run here, after waiting `queuedSeconds` since its submit. */
  taskStarted(t: { mode: TaskMode; queuedSeconds: number }): void
  /** A task ended (once, whatever ended it): `seconds` since its submit; `code` is its error code or null. */
  taskEnded(t: { mode: TaskMode; status: TaskStatus; code: string | null; seconds: number }): void
  /** The first text the model streamed for a task, `seconds` after its submit. */
  firstToken(t: { mode: TaskMode; seconds: number }): void
  /** The runner wrote its first line, `seconds` after it was started in its container. */
  runnerStarted(seconds: number): void
  /** A container was claimed from the pool after `seconds`. */
  containerClaimed(seconds: number): void
  /** A WebSocket connection opened (`+1`) or closed (`-1`). */
  socketConnections(delta: 1 | -1): void
  /** A WebSocket message received (`in`) or sent (`out`), by its protocol type. */
  socketMessage(direction: 'in' | 'out', type: string): void
  /** A model answer's usage, metered where the model is called (the credential broker's gateway). */
  modelUsage(u: ModelUsageObservation): void
  /** A notification delivery attempt by its integration type and outcome. */
  delivery(d: { channel: string; outcome: 'succeeded' | 'failed'; seconds: number }): void
  /** The coordination backend failed this instance: `unreachable`, `lease_lost` (fenced) or `reset` (its shared state lost). */
  coordinationError(kind: 'unreachable' | 'lease_lost' | 'reset'): void
  /** A call to the store failed, by the store's method (`get`, `put`, `list`, …). */
  storeError(operation: string): void
  /**
   * An exception nothing caught, thrown while the server served a request, an upgrade or a
   * `CONNECT`, that the server's last-resort guard contained (it ended that connection and kept
   * serving; see `guardUncaught` in `@berth/server`).
   */
  uncaughtError(context: 'request' | 'upgrade' | 'connect'): void
  /** Where this instance's queue depth is read from at scrape time. */
  watchQueue(depth: () => number): void
  /** Where the pool's container counts are read from at scrape time. */
  watchPool(stats: () => PoolStats): void
  /** Where this instance's idle warm sessions (no task running or queued) and the memory their containers reserve are read from at scrape time. */
  watchIdleSessions(idle: () => IdleSessionsStats): void
  /** The scrape: the exposition and its content type; absent when nothing is exported (`GET /metrics` is then a 404). */
  exposition?(): Promise<{ contentType: string; body: string }>
}

/**
 * Metrics that record nothing: the default when a deployment exports none.
 *
 * @example
 * ```ts
 * const services = createServices({ store, cipher, metrics: noopMetrics })
 * ```
 */
export const noopMetrics: Metrics = {
  requestEnded() {},
  taskStarted() {},
  taskEnded() {},
  firstToken() {},
  runnerStarted() {},
  containerClaimed() {},
  socketConnections() {},
  socketMessage() {},
  modelUsage() {},
  delivery() {},
  coordinationError() {},
  storeError() {},
  uncaughtError() {},
  watchQueue() {},
  watchPool() {},
  watchIdleSessions() {},
}

/** Seconds from `from` (an ISO time) to `now` (epoch milliseconds), never negative. */
export function secondsSince(from: string, now: number): number {
  const ms = now - Date.parse(from)
  return Number.isFinite(ms) && ms > 0 ? ms / 1000 : 0
}

/** Seconds since a `performance.now()` reading. */
export function secondsFrom(started: number): number {
  return (performance.now() - started) / 1000
}
