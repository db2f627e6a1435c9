import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Store } from '@berth/core'
import { memoryStore, postgresStore, redisStore, sqliteStore, unstorageStore } from '@berth/server'
import { startPostgres, startRedis, storeConformanceSuite, type LocalPostgres, type LocalRedis } from '@berth/testkit'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { afterAll, beforeAll } from 'vitest'

const writer = fileURLToPath(new URL('./fixtures/store-writer.ts', import.meta.url))
const spawnWriter = (driver: string, path: string) => () =>
  spawn(process.execPath, ['--import', 'tsx', writer, driver, path], { stdio: ['ignore', 'pipe', 'inherit'] })

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'berth-store-'))
}

/** Close whatever the last open handed out, then open the same storage again. */
function reopener(open: () => Store | Promise<Store>, first: Store) {
  let current = first
  return {
    reopen: async () => {
      await current.close?.()
      current = await open()
      return current
    },
    close: async () => current.close?.(),
  }
}

storeConformanceSuite('memory', () => ({ store: memoryStore() }))

storeConformanceSuite('sqlite', () => {
  const dir = tempDir()
  const path = join(dir, 'berth.db')
  const store = sqliteStore(path)
  const r = reopener(() => sqliteStore(path), store)
  return {
    store,
    reopen: r.reopen,
    spawnWriter: spawnWriter('sqlite', path),
    cleanup: async () => {
      await r.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
})

let redis: LocalRedis
let pg: LocalPostgres
beforeAll(async () => {
  ;[redis, pg] = await Promise.all([startRedis(), startPostgres()])
}, 60_000)
afterAll(async () => {
  await Promise.all([redis?.stop(), pg?.stop()])
})
let db = 0
storeConformanceSuite('redis', async () => {
  // One key prefix per test: each starts empty on the shared test server.
  const prefix = `t${++db}:`
  const open = () => redisStore({ client: redis.connect(), prefix })
  const store = open()
  const r = reopener(open, store)
  return {
    store,
    reopen: r.reopen,
    cleanup: r.close,
    spawnWriter: () =>
      spawn(process.execPath, ['--import', 'tsx', writer, 'redis', redis.path, prefix], {
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
  }
})

let schema = 0
storeConformanceSuite('postgres', async () => {
  // One schema per test: each starts empty on the shared test cluster.
  const name = `t${++schema}`
  const open = () => postgresStore(pg.url, { schema: name, max: 4 })
  const store = await open()
  const r = reopener(open, store)
  return {
    store,
    reopen: r.reopen,
    cleanup: r.close,
    spawnWriter: () =>
      spawn(process.execPath, ['--import', 'tsx', writer, 'postgres', pg.url, name], {
        stdio: ['ignore', 'pipe', 'inherit'],
      }),
  }
})

// unstorage (embedders' own `storage`): indexes derived from the records.
storeConformanceSuite('unstorage (memory, shared: no cache)', () => ({ store: unstorageStore(createStorage()) }))
storeConformanceSuite('unstorage (fs, sole writer: cached)', () => {
  const dir = tempDir()
  const open = () => unstorageStore(createStorage({ driver: fsDriver({ base: dir }) }), { cache: true })
  const store = open()
  return { store, reopen: async () => open(), cleanup: async () => rmSync(dir, { recursive: true, force: true }) }
})
