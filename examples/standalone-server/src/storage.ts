import { resolve } from 'node:path'
import { atomicFsDriver, type BerthConfig } from '@berth/server'
import { createStorage, type Storage } from 'unstorage'
import memoryDriver from 'unstorage/drivers/memory'

/** The storage Berth keeps its records in, and a description safe to log. */
export interface ChosenStorage {
  storage: Storage
  /** e.g. `fs (/srv/berth/.data/store)`; never contains a password. */
  description: string
}

/** `redis://user:secret@host:6379/0` → `redis://user:***@host:6379/0`. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(unparseable URL)'
  }
}

function isMissingModule(err: unknown, name: string): boolean {
  const e = err as { code?: string; message?: string }
  return (e?.code === 'ERR_MODULE_NOT_FOUND' || e?.code === 'MODULE_NOT_FOUND') && String(e.message).includes(name)
}

/**
 * The unstorage instance `BERTH_STORAGE` asks for: `fs` under `BERTH_DATA_DIR/store`,
 * `memory` (gone on restart), or `redis` at `BERTH_REDIS_URL`. The Redis driver needs the
 * optional `ioredis` package, loaded only when asked for.
 *
 * @example
 * ```ts
 * const { storage, description } = await storageFor(configFromEnv(process.env))
 * ```
 */
export async function storageFor(config: BerthConfig): Promise<ChosenStorage> {
  switch (config.storage) {
    case 'memory':
      return { storage: createStorage({ driver: memoryDriver() }), description: 'memory (lost on restart)' }
    case 'redis': {
      let redisDriver: typeof import('unstorage/drivers/redis').default
      try {
        redisDriver = (await import('unstorage/drivers/redis')).default
      } catch (err) {
        if (isMissingModule(err, 'ioredis')) {
          throw new Error(
            'BERTH_STORAGE=redis needs the "ioredis" package, which is not installed. ' +
              'Install it next to the server: pnpm --filter @berth/standalone-server add ioredis',
          )
        }
        throw err
      }
      const url = config.redisUrl!
      return {
        storage: createStorage({ driver: redisDriver({ url, base: 'berth' }) }),
        description: `redis (${redactUrl(url)})`,
      }
    }
    case 'fs': {
      const base = resolve(config.dataDir, 'store')
      // Atomic writes: a read racing a write, or a crash mid-write, never sees a torn record.
      return { storage: createStorage({ driver: atomicFsDriver({ base }) }), description: `fs (${base})` }
    }
  }
}
