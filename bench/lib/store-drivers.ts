/**
 * The store drivers bench/store.ts compares, each on a throwaway backend (SQLite in a
 * temporary file, Debian's `redis-server` without persistence, Debian's PostgreSQL 15 with
 * `fsync=off`), with the fastest honest way to fill each with many rows.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Store } from '@berth/core'
import { type ImportRow, postgresStore, redisStore, sqliteStore } from '@berth/server'
import { startPostgres, startRedis } from '@berth/testkit'

/** One driver under test. */
export interface BenchStore {
  store: Store
  /**
   * Write rows in bulk: SQLite's `importSync` and Postgres's `importMany` (the drivers' bulk
   * paths, one transaction per call), Redis through `Store.put` with many writes in flight
   * (it has no bulk path; each write is already one server-side script).
   */
  bulk(rows: ImportRow[]): Promise<void>
  /** What the database does by itself soon after a bulk load (Postgres: `VACUUM ANALYZE`). */
  settle(): Promise<void>
  done(): Promise<void>
}

/**
 * Open a fresh store of `driver` (`sqlite`, `redis` or `postgres`).
 *
 * @example
 * ```ts
 * const { store, bulk, done } = await openBenchStore('postgres')
 * await bulk(rows)
 * await done()
 * ```
 */
export async function openBenchStore(driver: string): Promise<BenchStore> {
  if (driver === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'berth-bench-store-'))
    const store = sqliteStore(join(dir, 'berth.db'))
    return {
      store,
      bulk: async (rows) => store.importSync(rows),
      settle: async () => {},
      done: async () => {
        await store.close()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  }
  if (driver === 'redis') {
    const redis = await startRedis()
    const store = redisStore({ client: redis.connect() })
    return {
      store,
      bulk: async (rows) => {
        for (let i = 0; i < rows.length; i += 256)
          await Promise.all(
            rows
              .slice(i, i + 256)
              .map((r) => (r.entry ? store.put(r.key, r.value, r.entry) : store.set(r.key, r.value))),
          )
      },
      settle: async () => {},
      done: async () => {
        await store.close()
        await redis.stop()
      },
    }
  }
  if (driver === 'postgres') {
    const pg = await startPostgres()
    const store = await postgresStore(pg.url)
    return {
      store,
      bulk: (rows) => store.importMany(rows),
      // Autovacuum would do this within a minute of the load: it sets the visibility map
      // (index-only scans of berth_index) and the planner's statistics.
      settle: async () => {
        execFileSync(join(pg.binDir, 'psql'), ['-q', pg.url, '-c', 'VACUUM ANALYZE'], { stdio: 'ignore' })
      },
      done: async () => {
        await store.close()
        await pg.stop()
      },
    }
  }
  throw new Error(`unknown driver ${driver}`)
}
