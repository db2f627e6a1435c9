/**
 * Berth as a standalone server: configuration from the environment (README "Standalone
 * server configuration"), storage per BERTH_STORAGE, node:http, clean shutdown.
 *
 *   pnpm start                      # from the repository root
 *   PORT=8080 BERTH_STORAGE=memory pnpm start
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { resolve } from 'node:path'
import { configFromEnv, createBerth } from '@berth/server'
import { onShutdown } from './shutdown.js'
import { storageFor } from './storage.js'

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

const { storage, description } = await storageFor(config).catch((err: Error) => fail(err.message))
const berth = createBerth({
  storage,
  dataDir: config.dataDir,
  encryptionKey: config.encryptionKey,
  adminToken: config.adminToken,
  rateLimit: { rpm: config.rateRpm, burst: config.rateBurst },
  bodyLimit: config.bodyLimit,
})

const server = createServer(berth.handler)
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

onShutdown(server, () => berth.close())
