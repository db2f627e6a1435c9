/** metrics/: the metrics port on prom-client, the counted store, the coordination's failures, the scrape listener. */
import type { Coordination, Metrics } from '@berth/core'

export { prometheusMetrics, type PrometheusMetrics, type PrometheusMetricsOptions } from './prometheus.js'
export { countedStore } from './store.js'
export { serveMetrics, type MetricsListener } from './listener.js'

/**
 * Count the coordination backend's failures as this instance sees them: unreachable, its
 * heartbeat lease lost, its shared state reset. Returns the unsubscribe function.
 *
 * @example
 * ```ts
 * const stop = watchCoordination(services.coordination, metrics)
 * ```
 */
export function watchCoordination(coordination: Coordination, metrics: Metrics): () => void {
  let last = coordination.state()
  return coordination.onStateChange((change) => {
    if (last.reachable && !change.reachable) metrics.coordinationError('unreachable')
    if (last.leased && !change.leased) metrics.coordinationError('lease_lost')
    if (change.reset) metrics.coordinationError('reset')
    last = change
  })
}
