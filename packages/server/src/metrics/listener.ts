/** The separate scrape listener (`BERTH_METRICS_LISTEN`): `GET /metrics` and nothing else, without authentication. */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Metrics } from '@berth/core'

/** A running scrape listener. */
export interface MetricsListener {
  /** Where it listens, e.g. `http://127.0.0.1:9464`. */
  url: string
  close(): Promise<void>
}

/**
 * Serve `GET /metrics` of `metrics` on its own address, unauthenticated: for a Prometheus
 * on a private interface or beside the server, so it needs no operator token. Bind it to an
 * address only trusted scrapers reach.
 *
 * @example
 * ```ts
 * const scrape = await serveMetrics(berth.metrics, { host: '127.0.0.1', port: 9464 })
 * // later: await scrape.close()
 * ```
 */
export async function serveMetrics(metrics: Metrics, at: { host: string; port: number }): Promise<MetricsListener> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0]
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD') || !metrics.exposition) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not found: this listener serves GET /metrics\n')
      return
    }
    metrics.exposition().then(
      ({ contentType, body }) => {
        res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) })
        res.end(req.method === 'HEAD' ? undefined : body)
      },
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${String(err)}\n`),
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(at.port, at.host, () => resolve())
  })
  const { address, port } = server.address() as AddressInfo
  const host = address.includes(':') ? `[${address}]` : address
  return {
    url: `http://${host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
