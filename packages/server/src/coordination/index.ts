// Coordination drivers of the server: the factory choosing one, and the redis driver (BullMQ, Lua, pub/sub).
import { memoryCoordination, type Coordination, type MemoryCoordinationOptions } from '@berth/core'
import { redisCoordination, type RedisCoordinationOptions } from './redis.js'

/** Which coordination driver to open, and its options. */
export type CoordinationOptions =
  | ({ driver: 'memory' } & MemoryCoordinationOptions)
  | ({ driver: 'redis' } & RedisCoordinationOptions)

/**
 * Open a coordination driver: `memory` for one process (the embedded default), `redis` for
 * several instances sharing one Redis.
 *
 * @example
 * ```ts
 * const coord = await createCoordination({ driver: 'redis', url: process.env.BERTH_REDIS_URL, prefix: 'berth:' })
 * await coord.once.claimOnce('oauth-state:abc', 600_000)
 * ```
 */
export async function createCoordination(opts: CoordinationOptions): Promise<Coordination> {
  switch (opts.driver) {
    case 'memory':
      return memoryCoordination(opts)
    case 'redis':
      return redisCoordination(opts)
    default:
      throw new Error(
        `coordination: unknown driver ${JSON.stringify((opts as { driver?: unknown }).driver)} (memory or redis)`,
      )
  }
}

export { redisCoordination, type RedisCoordinationOptions }
