/**
 * Berth as a standalone server: settings from the environment, `.env` and an optional
 * `berth.config.{ts,json}` (README "Configuration"), `berthFromConfig` (storage, runtime,
 * warm pool, coordination), node:http, the last-resort crash guard, clean shutdown on SIGINT/SIGTERM.
 *
 *   pnpm start                      # from the repository root
 *   PORT=8080 BERTH_STORAGE=memory pnpm start
 *   BERTH_RUNTIME=podman BERTH_IMAGE=localhost/berth-test:latest BERTH_POOL_MIN=1 pnpm start
 *   node dist/main.js prune --dry-run   # the `prune` subcommand (src/prune.ts)
 */
// First: the OpenTelemetry SDK registers before any module that creates spans is loaded.
import { telemetry, telemetryLine } from './telemetry.js'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { resolve } from 'node:path'
import { berthFromConfig, guardUncaught, integrationsLine, loadSettings, onShutdown, serveMetrics } from '@berth/server'

// `node dist/main.js prune [--dry-run]`, the server image's entry point with a subcommand: prune, then exit.
if (process.argv[2] === 'prune') {
  await import('./prune.js')
  process.exit()
}

function fail(message: string): never {
  console.error(`berth: ${message}`)
  process.exit(1)
}

// `pnpm start` runs in this package's directory; settings files and a relative
// BERTH_DATA_DIR are found where the command was typed (pnpm's INIT_CWD).
const cwd = process.env.INIT_CWD ?? process.cwd()
const { config, sources } = await loadSettings(cwd).catch((err: Error) => fail(err.message))
config.dataDir = resolve(cwd, config.dataDir)
// In the server image, tasks can have no network of their own: their firewall rules belong
// on the engine's host, out of reach of a non-root server on the bridge (README, "The server image").
const networked = config.environmentCaps.allowedPolicies.filter((p) => p !== 'none')
if (process.env.BERTH_SERVER_IMAGE && networked.length)
  fail(
    `BERTH_ENV_POLICIES lists ${networked.join(', ')}, which the server image cannot enforce: ` +
      'their host firewall rules need Berth on the engine\'s host (README, "The server image"); set BERTH_ENV_POLICIES=none',
  )
if (config.diskDir) config.diskDir = resolve(cwd, config.diskDir)
const started = await berthFromConfig(config, { warn: (line) => console.warn(line) }).catch((err: Error) =>
  fail(err.message),
)
const { berth } = started
console.log(`Settings: ${sources.join(', ')} · integrations: ${integrationsLine(config)}`)
for (const line of started.summary) console.log(line)
console.log(telemetryLine())
// Listen once the pool has adopted what the last run left and warmed up. When the engine
// does not answer, the API still serves what needs no container and the pool retries.
try {
  await berth.ready
  const { idle, in_use } = berth.services.pool.stats()
  console.log(`Pool ready: ${idle} warm, ${in_use} in use`)
  if (idle < config.poolMin)
    console.warn(`berth: could not warm ${config.poolMin} container(s) (see above); retrying in the background`)
} catch (err) {
  console.error(`berth: start-up did not complete: ${(err as Error).message}`)
  console.error(
    'berth: serving the API without warm containers; tasks fail with CONTAINER_FAILED until the engine ' +
      'answers (retried in the background, see /health).',
  )
}
// A separate scrape listener (BERTH_METRICS_LISTEN) answers without the operator token.
const listen = config.metricsListen
const scrape = listen
  ? await serveMetrics(berth.metrics, listen).catch((err: Error) =>
      fail(`BERTH_METRICS_LISTEN ${listen.host}:${listen.port}: ${err.message}`),
    )
  : undefined
console.log(
  config.metrics
    ? `Metrics: GET /metrics for the operator token${scrape ? ` and unauthenticated at ${scrape.url}/metrics` : ''}`
    : 'Metrics: off (BERTH_METRICS=off)',
)

const server = createServer(berth.handler)
server.on('upgrade', berth.handleUpgrade)
// An exception Node raises about one connection ends that connection, not every caller's
// tasks; anything else still exits (docs/OPERATIONS.md, "Uncaught exceptions").
guardUncaught(server, { metrics: berth.metrics })
server.on('error', (err: NodeJS.ErrnoException) =>
  fail(err.code === 'EADDRINUSE' ? `${config.host}:${config.port} is already in use (set PORT or HOST)` : err.message),
)
server.listen(config.port, config.host, () => {
  const { address, family, port } = server.address() as AddressInfo
  // Never print the admin token itself: only whether the admin API is open.
  const admin = config.adminToken ? 'enabled (BERTH_ADMIN_TOKEN)' : 'disabled (set BERTH_ADMIN_TOKEN to enable)'
  console.log(`Berth listening on http://${family === 'IPv6' ? `[${address}]` : address}:${port} · admin API: ${admin}`)
})

// Warm containers stay on the engine: the next start adopts them instead of creating new ones.
onShutdown(
  server,
  async () => {
    await scrape?.close()
    await started.close()
    // Last: the spans of the shutdown itself go out too.
    await telemetry?.shutdown()
  },
  { closeWebSockets: (o) => berth.closeWebSockets(o), drain: () => berth.drain() },
)
