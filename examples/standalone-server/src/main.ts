/**
 * Berth as a standalone server: configuration from the environment, `.env` and an optional
 * `berth.config.{ts,json}` (README "Configuration"), storage per BERTH_STORAGE, the container runtime per
 * BERTH_RUNTIME with a warm pool, node:http, clean shutdown.
 *
 *   pnpm start                      # from the repository root
 *   PORT=8080 BERTH_STORAGE=memory pnpm start
 *   BERTH_RUNTIME=podman BERTH_IMAGE=localhost/berth-test:latest BERTH_POOL_MIN=1 pnpm start
 */
// First: the OpenTelemetry SDK registers before any module that creates spans is loaded.
import { telemetry, telemetryLine } from './telemetry.js'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { resolve } from 'node:path'
import { hostImageRecipe } from '@berth/adapter-docker'
import { defaultPoolName } from '@berth/core'
import { sharedRunnerBundle } from '@berth/runner'
import { createBerth, serveMetrics, type BerthConfig } from '@berth/server'
import { runtimeFor } from './runtime.js'
import { loadSettings } from './settings.js'
import { onShutdown } from './shutdown.js'
import { storageFor } from './storage.js'
import { coordinationFor, instanceIdFor } from './coordination.js'

/** The image task containers start from when BERTH_IMAGE is not set. */
const DEFAULT_IMAGE = 'berth-runner:latest'

function fail(message: string): never {
  console.error(`berth: ${message}`)
  process.exit(1)
}

/** The integrations callers can connect, for the start-up log (never a secret). */
function integrations(c: BerthConfig): string {
  const on = [...Object.keys(c.gitProviders), ...(c.chatProvider ? ['chat'] : []), ...(c.mailProvider ? ['mail'] : [])]
  // Banking and messenger are always on; their API address is worth a mention when moved.
  const at = (name: string, url: string | undefined) => (url ? [`${name} at ${new URL(url).host}`] : [])
  return (
    [...on, ...at('bank', c.bankProvider.apiBaseUrl), ...at('messenger', c.messenger.apiBaseUrl)].join(', ') ||
    'none configured'
  )
}

// `pnpm start` runs in this package's directory; settings files and a relative
// BERTH_DATA_DIR are found where the command was typed (pnpm's INIT_CWD), so the root's
// `.env`, `berth.config.json` and `./.data` are the defaults.
const cwd = process.env.INIT_CWD ?? process.cwd()
const { config, sources } = await loadSettings(cwd).catch((err: Error): never => fail(err.message))
config.dataDir = resolve(cwd, config.dataDir)

const { store, description } = await storageFor(config).catch((err: Error) => fail(err.message))
const chosen = await runtimeFor(config, (line) => console.warn(line)).catch((err: Error) => fail(err.message))
// The local runtime runs host processes: an image means nothing there.
const image = chosen.name === 'local' ? 'local' : (config.image ?? DEFAULT_IMAGE)
// Task containers run the agent runner: by default a self-contained bundle built from this
// install (one per install and version, shared by every data dir: see sharedRunnerBundle),
// mounted read-only (any image with Node 20 works; on `local`, this host's Node);
// BERTH_RUNNER=image uses the copy the production image (packages/runner/Dockerfile)
// carries at the same path (there is no image on `local`).
let runner: { bundleDir?: string; command?: string[] }
if (config.runner === 'image' && chosen.name !== 'local') {
  runner = { command: ['node', '/opt/berth-runner/main.js'] }
} else {
  // One bundle per install and version, shared by every data dir (which holds data only).
  runner = { bundleDir: sharedRunnerBundle().dir }
}
// A missing image is pulled, else built from this host's node (bundle mode only: the
// image then needs nothing but Node, bash and the libraries, the runner is mounted).
let imageRecipe: ReturnType<typeof hostImageRecipe> | undefined
if (runner?.bundleDir) {
  try {
    imageRecipe = hostImageRecipe()
  } catch (err) {
    console.warn(
      `berth: cannot build images from this host (${(err as Error).message}); a missing ${image} must be pulled`,
    )
  }
}
const poolName = config.poolName ?? defaultPoolName(config.dataDir)
const instanceId = instanceIdFor(config, poolName)
const coordination = await coordinationFor(config, instanceId, (line) => console.warn(line)).catch((err: Error) =>
  fail(`coordination: ${err.message}`),
)
const berth = createBerth({
  store,
  ...(coordination && { coordination }),
  dataDir: config.dataDir,
  encryptionKey: config.encryptionKey,
  adminToken: config.adminToken,
  rateLimit: { rpm: config.rateRpm, burst: config.rateBurst },
  bodyLimit: config.bodyLimit,
  auditRetentionDays: config.auditRetentionDays,
  workspaceFiles: { quotaBytes: config.snapshotQuotaMb * 1024 * 1024 },
  runtime: chosen.runtime,
  pool: {
    image,
    min: config.poolMin,
    max: config.poolMax,
    name: poolName,
    warmAgents: config.warmAgents,
    ...(imageRecipe && { imageRecipe }),
  },
  concurrency: config.concurrency,
  taskTimeLimit: config.taskTimeLimit,
  reconcileMs: config.reconcileSeconds === 0 ? null : config.reconcileSeconds * 1000,
  console: true,
  allowPrivateWebhooks: config.allowPrivateWebhooks,
  ...(config.smtp && { smtp: config.smtp }),
  gitProviders: config.gitProviders,
  ...(config.chatProvider && { chatProvider: config.chatProvider }),
  ...(config.mailProvider && { mailProvider: config.mailProvider }),
  bankProvider: config.bankProvider,
  messenger: config.messenger,
  runner,
  environments: {
    caps: config.environmentCaps,
    ...(imageRecipe && { recipe: (packages: readonly string[]) => hostImageRecipe({ packages }) }),
  },
  agentUser: config.agentUser,
  metrics: config.metrics,
  broker: config.broker && {
    ...(config.brokerUpstreamCa && { upstreamCa: [readFileSync(config.brokerUpstreamCa, 'utf8')] }),
  },
})

console.log(`Settings: ${sources.join(', ')} · integrations: ${integrations(config)}`)
const poolLine = `pool ${poolName}: min ${config.poolMin}, max ${config.poolMax}${chosen.name === 'local' ? '' : `, image ${image}`}`
console.log(`Runtime: ${chosen.description} · ${poolLine}`)
if (coordination) console.log(`Coordination: redis, prefix ${config.redisPrefix}, instance ${instanceId}`)
if (runner?.bundleDir) console.log(`Runner bundle: ${runner.bundleDir}`)
console.log(telemetryLine())
console.log(
  config.broker
    ? `Credentials: broker on (model gateway and egress proxy on sockets in ${resolve(config.dataDir, 'broker/public')})`
    : 'Credentials: broker OFF (BERTH_BROKER=off): the model key enters task containers',
)
const caps = config.environmentCaps
console.log(
  `Environments: default network ${caps.defaultPolicy}, offered ${caps.allowedPolicies.join('/')}${chosen.name === 'local' ? '' : `, agent user ${config.agentUser}`}`,
)
// Listen only once the pool has adopted what the last run left and warmed up. If the engine
// went away since the ping, start-up fails: the API still serves everything that needs no
// container, /health shows the engine down, and the pool retries with backoff until it
// answers. A missing image is provisioned (pulled or built) before the first container.
try {
  await berth.ready
  const { idle, in_use } = berth.services.pool.stats()
  console.log(`Pool ready: ${idle} warm, ${in_use} in use`)
  if (idle < config.poolMin) {
    console.warn(
      `berth: could not warm ${config.poolMin} container(s) (see the warning above); retrying in the background`,
    )
  }
} catch (err) {
  console.error(`berth: start-up did not complete: ${(err as Error).message}`)
  console.error(
    'berth: serving the API without warm containers; tasks fail with CONTAINER_FAILED until the engine ' +
      'answers (retried in the background, see /health).',
  )
}

// A separate scrape listener (BERTH_METRICS_LISTEN) answers without the operator token.
const scrape = config.metricsListen
  ? await serveMetrics(berth.metrics, config.metricsListen).catch((err: Error) =>
      fail(`BERTH_METRICS_LISTEN ${config.metricsListen?.host}:${config.metricsListen?.port}: ${err.message}`),
    )
  : undefined
console.log(
  config.metrics
    ? `Metrics: GET /metrics for the operator token${scrape ? ` and unauthenticated at ${scrape.url}/metrics` : ''}`
    : 'Metrics: off (BERTH_METRICS=off)',
)

const server = createServer(berth.handler)
server.on('upgrade', berth.handleUpgrade)
server.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EADDRINUSE') fail(`${config.host}:${config.port} is already in use (set PORT or HOST)`)
  fail(err.message)
})
server.listen(config.port, config.host, () => {
  const { address, family, port } = server.address() as AddressInfo
  const host = family === 'IPv6' ? `[${address}]` : address
  // Never print the admin token itself: only whether the admin API is open.
  const admin = config.adminToken ? 'enabled (BERTH_ADMIN_TOKEN)' : 'disabled (set BERTH_ADMIN_TOKEN to enable)'
  console.log(`Berth listening on http://${host}:${port} · storage: ${description} · admin API: ${admin}`)
})

// Warm containers stay on the engine: the next start adopts them instead of creating new ones.
onShutdown(
  server,
  async () => {
    await scrape?.close()
    await berth.close()
    await coordination?.close()
    await chosen.runtime.close?.()
    // Last: the spans of the shutdown itself go out too.
    await telemetry?.shutdown()
  },
  { closeWebSockets: (o) => berth.closeWebSockets(o), drain: () => berth.drain() },
)
