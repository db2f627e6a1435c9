import { resolve } from 'node:path'
import { jsonLogger, type Logger, type Store } from '@berth/core'
import type { BerthConfig } from '../config.js'
import { embeddedStore } from '../storage/embedded.js'
import { memoryStore } from '../storage/memory.js'
import { postgresStore } from '../storage/postgres.js'
import { redisStore } from '../storage/redis.js'

/** The store Berth keeps its records in, and a description safe to log. */
export interface ChosenStorage {
  store: Store
  /** e.g. `sqlite (/srv/berth/.data/berth.db)`; never contains a password. */
  description: string
}

/** `redis://user:secret@host:6379/0` → `redis://user:***@host:6379/0`. */
export function redactUrl(url: string): string {
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
 * The store `BERTH_STORAGE` asks for: `fs` (the default) or `sqlite`, both the embedded
 * SQLite file `BERTH_DATA_DIR/berth.db` (a data dir in the older fs layout,
 * `BERTH_DATA_DIR/store`, is migrated into it once, with progress on the console);
 * `memory` (gone on restart); `redis` at `BERTH_REDIS_URL`, which needs the optional
 * `ioredis` package, loaded only when asked for; or `postgres` at `BERTH_DATABASE_URL`
 * (its schema migrated on start; `BERTH_DATABASE_CA_FILE` for a private CA).
 *
 * @example
 * ```ts
 * const { store, description } = await storageFor(configFromEnv(process.env))
 * ```
 */
export async function storageFor(config: BerthConfig, logger: Logger = jsonLogger()): Promise<ChosenStorage> {
  switch (config.storage) {
    case 'memory':
      return { store: memoryStore(), description: 'memory (lost on restart)' }
    case 'redis': {
      const url = config.redisUrl!
      try {
        const { Redis } = await import('ioredis')
        return {
          store: redisStore({ client: new Redis(url, { maxRetriesPerRequest: 3 }) }),
          description: `redis (${redactUrl(url)})`,
        }
      } catch (err) {
        if (isMissingModule(err, 'ioredis')) {
          throw new Error(
            'BERTH_STORAGE=redis needs the "ioredis" package, which is not installed. ' +
              'Install it next to @berth/server (npm install ioredis)',
          )
        }
        throw err
      }
    }
    case 'postgres': {
      const url = config.databaseUrl!
      const store = await postgresStore(url, { caFile: config.databaseCaFile }).catch((err: Error) => {
        throw new Error(`the Postgres database at ${redactUrl(url)} could not be opened: ${err.message}`)
      })
      return { store, description: `postgres (${redactUrl(url)})` }
    }
    case 'fs':
    case 'sqlite': {
      const path = resolve(config.dataDir, 'berth.db')
      return { store: embeddedStore(config.dataDir, logger), description: `sqlite (${path})` }
    }
  }
}
