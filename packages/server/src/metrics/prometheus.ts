/** The metrics port on prom-client: one Registry per server (never the global one), Node's process metrics included. */
import type { IdleSessionsStats, Metrics, PoolStats } from '@berth/core'
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { VERSION } from '../version.js'
import { boundedLabel, methodLabel } from './labels.js'

/** Metrics kept in a prom-client Registry, with the scrape that exports them. */
export interface PrometheusMetrics extends Metrics {
  /** This server's registry (add your own metrics to it to have them scraped with Berth's); process metrics are kept apart, once per process. */
  readonly registry: Registry
  exposition(): Promise<{ contentType: string; body: string }>
}

/** Options of {@link prometheusMetrics}. */
export interface PrometheusMetricsOptions {
  /** Node process metrics (`process_*`, `nodejs_*`) in the scrape, from one registry shared by the process (default true). */
  processMetrics?: boolean
}

// Buckets by what each measures: requests are milliseconds, first tokens and starts seconds, tasks minutes.
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const START_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60]
const WAIT_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900]
const TASK_BUCKETS = [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200]
const DELIVERY_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

let shared: Registry | undefined

/**
 * Node's process metrics, in one registry per process: they describe the process, not a
 * server, and prom-client's collectors (an event-loop delay monitor, a GC observer) cannot be
 * stopped, so every server of the process shares one set rather than each adding its own.
 */
function processRegistry(): Registry {
  if (shared) return shared
  shared = new Registry()
  collectDefaultMetrics({ register: shared })
  // Gauges named like counters fail `promtool check metrics`; each is the sum of its per-type `nodejs_active_*` series.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'])
    shared.removeSingleMetric(name)
  return shared
}

/**
 * Berth's metrics in their own prom-client Registry: requests by route name, tasks, queue,
 * first token, runner start, pool, WebSocket, model tokens and cost, deliveries, store and
 * coordination errors, exceptions the server's guard contained, and Node's process metrics.
 * Label values are bounded: free-form ones (model, provider) are checked for shape and capped
 * in number, the rest come from fixed lists.
 *
 * @example
 * ```ts
 * const metrics = prometheusMetrics()
 * const berth = createBerth({ metrics })
 * const { contentType, body } = await metrics.exposition()
 * ```
 */
export function prometheusMetrics(opts: PrometheusMetricsOptions = {}): PrometheusMetrics {
  const registry = new Registry()
  const nodeMetrics = (opts.processMetrics ?? true) ? processRegistry() : undefined
  const registers = [registry]
  // The usual info metric: join on it to see which version each instance runs.
  new Gauge({
    name: 'berth_build_info',
    help: 'Always 1; the version of @berth/server this instance runs',
    labelNames: ['version'],
    registers,
  }).set({ version: VERSION }, 1)
  const requests = new Counter({
    name: 'berth_http_requests_total',
    help: 'HTTP requests answered, by route name, method and status',
    labelNames: ['route', 'method', 'status'],
    registers,
  })
  const requestSeconds = new Histogram({
    name: 'berth_http_request_duration_seconds',
    help: 'Time to answer an HTTP request (to its response head for streamed bodies), by route name and method',
    labelNames: ['route', 'method'],
    buckets: REQUEST_BUCKETS,
    registers,
  })
  const started = new Counter({
    name: 'berth_tasks_started_total',
    help: 'Tasks that left the queue to run on this instance, by mode',
    labelNames: ['mode'],
    registers,
  })
  const ended = new Counter({
    name: 'berth_tasks_ended_total',
    help: 'Tasks ended, by mode, status and error code (`none` without an error)',
    labelNames: ['mode', 'status', 'code'],
    registers,
  })
  const taskSeconds = new Histogram({
    name: 'berth_task_duration_seconds',
    help: 'Time from a task submit to its end, by mode and status',
    labelNames: ['mode', 'status'],
    buckets: TASK_BUCKETS,
    registers,
  })
  const waitSeconds = new Histogram({
    name: 'berth_task_queue_wait_seconds',
    help: 'Time a task waited from its submit until it started to run, by mode',
    labelNames: ['mode'],
    buckets: WAIT_BUCKETS,
    registers,
  })
  const firstToken = new Histogram({
    name: 'berth_task_first_token_seconds',
    help: "Time from a task submit to the model's first streamed text, by mode",
    labelNames: ['mode'],
    buckets: START_BUCKETS,
    registers,
  })
  const runnerStart = new Histogram({
    name: 'berth_runner_start_seconds',
    help: 'Time from starting the runner in its container to its first line',
    buckets: START_BUCKETS,
    registers,
  })
  const claimSeconds = new Histogram({
    name: 'berth_pool_claim_seconds',
    help: 'Time to claim a container from the pool (warm, created, or after waiting for room)',
    buckets: START_BUCKETS,
    registers,
  })
  const sockets = new Gauge({ name: 'berth_websocket_connections', help: 'Open WebSocket connections', registers })
  const socketMessages = new Counter({
    name: 'berth_websocket_messages_total',
    help: 'WebSocket messages, by direction (in, out) and protocol type (`invalid` for unreadable ones)',
    labelNames: ['direction', 'type'],
    registers,
  })
  const tokens = new Counter({
    name: 'berth_model_tokens_total',
    help: 'Model tokens metered by the gateway, by provider, model and kind (input, output, cache_read, cache_write)',
    labelNames: ['provider', 'model', 'kind'],
    registers,
  })
  const cost = new Counter({
    name: 'berth_model_cost_usd_total',
    help: 'Model cost in US dollars metered by the gateway, by provider and model',
    labelNames: ['provider', 'model'],
    registers,
  })
  const deliveries = new Counter({
    name: 'berth_notification_deliveries_total',
    help: 'Notification delivery attempts, by channel (integration type) and outcome',
    labelNames: ['channel', 'outcome'],
    registers,
  })
  const deliverySeconds = new Histogram({
    name: 'berth_notification_delivery_seconds',
    help: 'Time of one delivery attempt, by channel',
    labelNames: ['channel'],
    buckets: DELIVERY_BUCKETS,
    registers,
  })
  const coordinationErrors = new Counter({
    name: 'berth_coordination_errors_total',
    help: 'Coordination backend failures seen by this instance, by kind (unreachable, lease_lost, reset)',
    labelNames: ['kind'],
    registers,
  })
  const storeErrors = new Counter({
    name: 'berth_store_errors_total',
    help: 'Failed store calls, by operation',
    labelNames: ['operation'],
    registers,
  })
  const uncaught = new Counter({
    name: 'berth_uncaught_errors_total',
    help: "Exceptions nothing caught while a connection was served, contained by the server's guard (that connection ended), by context (request, upgrade, connect)",
    labelNames: ['context'],
    registers,
  })
  // Read at scrape time from whoever registered a source; zero until then.
  let queueDepth = () => 0
  let poolStats = (): PoolStats => ({ min: 0, max: 0, in_use: 0, idle: 0 })
  let idleSessions = (): IdleSessionsStats => ({ sessions: 0, memoryBytes: 0, livingAgents: 0 })
  new Gauge({
    name: 'berth_task_queue_depth',
    help: "Tasks waiting in this instance's queue",
    registers,
    collect() {
      this.set(queueDepth())
    },
  })
  new Gauge({
    name: 'berth_pool_containers',
    help: 'Pool containers by state (idle, in_use), and the pool bounds (min, max)',
    labelNames: ['state'],
    registers,
    collect() {
      const s = poolStats()
      for (const state of ['idle', 'in_use', 'min', 'max'] as const) this.set({ state }, s[state])
    },
  })
  new Gauge({
    name: 'berth_idle_sessions',
    help: 'Warm sessions of this instance with no task running or queued (each yields to a task that waits for what it holds)',
    registers,
    collect() {
      this.set(idleSessions().sessions)
    },
  })
  new Gauge({
    name: 'berth_idle_living_agents',
    help: 'Idle sessions whose agent lives on between tasks (Claude Code up in the container, what it left running in the background running)',
    registers,
    collect() {
      this.set(idleSessions().livingAgents)
    },
  })
  new Gauge({
    name: 'berth_idle_session_memory_bytes',
    help: "The memory caps the idle sessions' containers reserve against this instance's memory budget",
    registers,
    collect() {
      this.set(idleSessions().memoryBytes)
    },
  })
  const models = boundedLabel(100)
  const providers = boundedLabel(20)
  const channels = boundedLabel(30)

  return {
    registry,
    async exposition() {
      const body = await registry.metrics()
      return { contentType: registry.contentType, body: nodeMetrics ? `${body}\n${await nodeMetrics.metrics()}` : body }
    },
    requestEnded(r) {
      const method = methodLabel(r.method)
      requests.inc({ route: r.route, method, status: String(r.status) })
      requestSeconds.observe({ route: r.route, method }, r.seconds)
    },
    taskStarted(t) {
      started.inc({ mode: t.mode })
      waitSeconds.observe({ mode: t.mode }, t.queuedSeconds)
    },
    taskEnded(t) {
      const code = t.code && /^[A-Z_]{1,40}$/.test(t.code) ? t.code : t.code ? 'OTHER' : 'none'
      ended.inc({ mode: t.mode, status: t.status, code })
      taskSeconds.observe({ mode: t.mode, status: t.status }, t.seconds)
    },
    firstToken: (t) => firstToken.observe({ mode: t.mode }, t.seconds),
    runnerStarted: (seconds) => runnerStart.observe(seconds),
    containerClaimed: (seconds) => claimSeconds.observe(seconds),
    socketConnections: (delta) => sockets.inc(delta),
    socketMessage: (direction, type) => socketMessages.inc({ direction, type }),
    modelUsage(u) {
      const labels = { provider: providers(u.provider), model: models(u.model) }
      // prom-client throws on a negative increment; a provider's odd report is not worth a failed call.
      const add = (n: number) => (Number.isFinite(n) && n > 0 ? n : 0)
      tokens.inc({ ...labels, kind: 'input' }, add(u.input_tokens))
      tokens.inc({ ...labels, kind: 'output' }, add(u.output_tokens))
      tokens.inc({ ...labels, kind: 'cache_read' }, add(u.cache_read_tokens))
      tokens.inc({ ...labels, kind: 'cache_write' }, add(u.cache_write_tokens))
      cost.inc(labels, add(u.cost_usd))
    },
    delivery(d) {
      const channel = channels(d.channel)
      deliveries.inc({ channel, outcome: d.outcome })
      deliverySeconds.observe({ channel }, d.seconds)
    },
    coordinationError: (kind) => coordinationErrors.inc({ kind }),
    storeError: (operation) => storeErrors.inc({ operation }),
    uncaughtError: (context) => uncaught.inc({ context }),
    watchQueue(depth) {
      queueDepth = depth
    },
    watchPool(stats) {
      poolStats = stats
    },
    watchIdleSessions(idle) {
      idleSessions = idle
    },
  }
}
