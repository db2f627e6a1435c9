import { hostname } from 'node:os'
import type { Coordination } from '@berth/core'
import type { BerthConfig } from '../config.js'
import { Redis } from 'ioredis'
import { createCoordination } from '../coordination/index.js'
import { coordinationScripts } from '../coordination/redis-scripts.js'

/** How long a restart waits for its previous run's heartbeat (same instance id) to lapse: the driver's 30 s lease and some. */
const SAME_ID_WAIT_MS = 40_000

/**
 * This instance's id among those sharing one Redis: `BERTH_INSTANCE_ID`, else the host
 * name and the pool name, which stay the same across restarts (so a restarted instance
 * recovers its own running tasks) and differ between servers on one host (each has its
 * own pool name).
 *
 * @example
 * ```ts
 * instanceIdFor(config, 'berth-3f2a') // 'build-01-berth-3f2a'
 * ```
 */
export function instanceIdFor(config: BerthConfig, poolName: string): string {
  return config.instanceId ?? `${hostname().replace(/[^A-Za-z0-9_.:-]/g, '-')}-${poolName}`
}

/** Whether `config` runs instances coordinated on Redis (`BERTH_STORAGE=redis`, or `postgres` with `BERTH_REDIS_URL`). */
function onRedis(config: BerthConfig): boolean {
  return config.storage === 'redis' || (config.storage === 'postgres' && Boolean(config.redisUrl))
}

/**
 * Whether the instance `instanceId` is alive on the deployment's Redis (its heartbeat lease
 * under `BERTH_REDIS_PREFIX` has not lapsed), read without joining; false when the deployment
 * coordinates on no Redis. A clean stop ends the lease at once; a killed instance's lapses in 30 s.
 *
 * @example
 * ```ts
 * await instanceAlive(config, instanceIdFor(config, poolName)) // true while that instance runs
 * ```
 */
export async function instanceAlive(config: BerthConfig, instanceId: string): Promise<boolean> {
  if (!onRedis(config)) return false
  const client = new Redis(config.redisUrl!, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: config.redisTimeoutMs,
  })
  client.on('error', () => {}) // the failed call below says why
  try {
    await client.connect()
    const alive = (await coordinationScripts(client).berthAlive([`${config.redisPrefix}instances`])) as string[]
    return alive.includes(instanceId)
  } finally {
    client.disconnect()
  }
}

/**
 * The coordination several instances share: with `BERTH_STORAGE=redis` (or `postgres` and
 * `BERTH_REDIS_URL` set), the redis driver on `BERTH_REDIS_URL` under `BERTH_REDIS_PREFIX`; otherwise none (one process: Berth's own
 * memory driver). When the id is still alive on Redis (this instance crashed and restarts
 * before its heartbeat lapsed), waits for it to lapse, then fails if it does not.
 *
 * @example
 * ```ts
 * const coordination = await coordinationFor(config, instanceIdFor(config, poolName), console.warn)
 * // ... createBerth({ coordination }); on shutdown: await coordination?.close()
 * ```
 */
export async function coordinationFor(
  config: BerthConfig,
  instanceId: string,
  warn: (line: string) => void,
): Promise<Coordination | undefined> {
  // Postgres keeps the records; with a Redis beside it, several instances coordinate there.
  if (!onRedis(config)) return undefined
  const open = () =>
    createCoordination({
      driver: 'redis',
      url: config.redisUrl!,
      prefix: config.redisPrefix,
      commandTimeoutMs: config.redisTimeoutMs,
      instanceId,
      onError: (err) => warn(`berth: coordination: ${String(err)}`),
    })
  const until = Date.now() + SAME_ID_WAIT_MS
  for (let told = false; ; ) {
    try {
      return await open()
    } catch (err) {
      if (!/already alive/.test(String(err)) || Date.now() > until) throw err
      if (!told)
        warn(
          `berth: instance ${instanceId} is still alive on Redis (a previous run?): waiting for its heartbeat to lapse`,
        )
      told = true
      await new Promise((r) => setTimeout(r, 2000))
    }
  }
}
