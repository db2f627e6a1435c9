/**
 * Berth as a standalone server: configuration from the environment (README "Standalone
 * server configuration"), storage per BERTH_STORAGE, the container runtime per
 * BERTH_RUNTIME with a warm pool, node:http, clean shutdown.
 *
 *   pnpm start                      # from the repository root
 *   PORT=8080 BERTH_STORAGE=memory pnpm start
 *   BERTH_RUNTIME=podman BERTH_IMAGE=localhost/berth-test:latest BERTH_POOL_MIN=1 pnpm start
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { resolve } from 'node:path'
import { bundleRunner } from '@berth/runner'
import { configFromEnv, createBerth } from '@berth/server'
import { runtimeFor } from './runtime.js'
import { onShutdown } from './shutdown.js'
import { storageFor } from './storage.js'

/** The image task containers start from when BERTH_IMAGE is not set. */
const DEFAULT_IMAGE = 'berth-runner:latest'

function fail(message: string): never {
  console.error(`berth: ${message}`)
  process.exit(1)
}

let config: ReturnType<typeof configFromEnv>
try {
  config = configFromEnv(process.env)
} catch (err) {
  fail((err as Error).message)
}

// `pnpm start` runs in this package's directory; resolve a relative BERTH_DATA_DIR from
// where the command was typed (pnpm's INIT_CWD), so the root's `./.data` is the default.
config.dataDir = resolve(process.env.INIT_CWD ?? process.cwd(), config.dataDir)

const { store, description } = await storageFor(config).catch((err: Error) => fail(err.message))
const chosen = await runtimeFor(config, (line) => console.warn(line)).catch((err: Error) => fail(err.message))
// The local runtime runs host processes: an image means nothing there.
const image = chosen.name === 'local' ? 'local' : (config.image ?? DEFAULT_IMAGE)
// Task containers run the agent runner: by default a self-contained bundle built from this
// install, mounted read-only (any image with Node 20 works); BERTH_RUNNER=image uses the
// copy the production image (packages/runner/Dockerfile) carries at the same path.
let runner: { bundleDir?: string; command?: string[] } | undefined
if (chosen.name === 'local') {
  console.warn('berth: the local runtime runs no agent tasks (no container paths); use Docker or Podman for tasks')
} else if (config.runner === 'image') {
  runner = { command: ['node', '/opt/berth-runner/main.js'] }
} else {
  runner = { bundleDir: bundleRunner(resolve(config.dataDir, 'runner')).dir }
}
const berth = createBerth({
  store,
  dataDir: config.dataDir,
  encryptionKey: config.encryptionKey,
  adminToken: config.adminToken,
  rateLimit: { rpm: config.rateRpm, burst: config.rateBurst },
  bodyLimit: config.bodyLimit,
  runtime: chosen.runtime,
  pool: { image, min: config.poolMin, max: config.poolMax },
  concurrency: config.concurrency,
  allowPrivateWebhooks: config.allowPrivateWebhooks,
  ...(config.smtp && { smtp: config.smtp }),
  ...(runner && { runner }),
})

const poolLine = `pool: min ${config.poolMin}, max ${config.poolMax}${chosen.name === 'local' ? '' : `, image ${image}`}`
console.log(`Runtime: ${chosen.description} · ${poolLine}`)
// Listen only once the pool has adopted what the last run left and warmed up. If the engine
// went away since the ping, start-up fails: the API still serves everything that needs no
// container, /health shows the empty pool, and a supervisor does not crash-loop us. A
// missing image does not fail it: warming retries in the background.
try {
  await berth.ready
  const { idle, in_use } = berth.services.pool.stats()
  console.log(`Pool ready: ${idle} warm, ${in_use} in use`)
  if (idle < config.poolMin) {
    console.warn(`berth: could not warm ${config.poolMin} container(s) (see the warning above); retrying in the background`)
  }
} catch (err) {
  console.error(`berth: start-up did not complete: ${(err as Error).message}`)
  console.error(
    'berth: serving the API without warm containers; tasks fail with CONTAINER_FAILED until the engine ' +
      'answers and Berth is restarted.',
  )
}

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
onShutdown(server, async () => {
  await berth.close()
  await chosen.runtime.close?.()
})
