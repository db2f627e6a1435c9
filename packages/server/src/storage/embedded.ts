import { resolve } from 'node:path'
import type { Logger } from '@berth/core'
import { migrateFsLayout } from './migrate.js'
import { sqliteStore, type SqliteStore } from './sqlite.js'

/**
 * The embedded default store: SQLite at `<dataDir>/berth.db`. A data dir still in the fs
 * layout of earlier versions (`<dataDir>/store`) is migrated into it first, once.
 *
 * @example
 * ```ts
 * const store = embeddedStore('./.data', jsonLogger())
 * ```
 */
export function embeddedStore(dataDir: string, logger: Logger): SqliteStore {
  const store = sqliteStore(resolve(dataDir, 'berth.db'))
  try {
    migrateFsLayout(resolve(dataDir, 'store'), store, logger)
  } catch (err) {
    void store.close()
    throw err
  }
  return store
}
