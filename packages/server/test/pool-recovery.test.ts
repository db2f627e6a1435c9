import { join } from 'node:path'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { podmanRuntime } from '@berth/adapter-podman'
import { IDLE_COMMAND, isContainerError, type ContainerRuntime, type PooledContainer } from '@berth/core'
import { ADMIN_TOKEN, clientFor, failure, startServer, type TestServer } from './helpers.js'
import {
  ENGINES,
  closeRemoving,
  engineRuntime,
  expectedStats,
  onEngine,
  sweep,
  tempDataDir,
  uniquePoolName,
} from './pool.helpers.js'

/** Close the HTTP server and Berth the way a restart does: containers stay on the engine. */
async function stopKeeping(s: TestServer): Promise<void> {
  s.server.closeAllConnections()
  await new Promise<void>((r) => s.server.close(() => r()))
  await s.berth.close()
}

async function gone(runtime: ContainerRuntime, id: string): Promise<boolean> {
  return runtime.inspect(id).then(
    () => false,
    (err) => {
      if (isContainerError(err, 'not_found')) return true
      throw err
    },
  )
}

describe.each(ENGINES)('pool restart recovery on %s', { timeout: 90_000 }, (engine) => {
  const name = uniquePoolName(`recover-${engine}`)
  const dataDir = tempDataDir()
  const { info, runtime } = engineRuntime(engine)
  // Each server gets its own unstorage instance on the same fs directory, like a restarted process.
  const fsStorage = () => createStorage({ driver: fsDriver({ base: join(dataDir, 'store') }) })
  const start = () =>
    startServer({ dataDir, storage: fsStorage(), runtime, pool: { image: info.image, min: 2, max: 3, name } })
  let second: TestServer | undefined

  afterAll(async () => {
    await closeRemoving(second, dataDir)
    expect(await sweep(runtime, name)).toBe(0)
  }, 60_000)

  it('adopts idle containers, removes the in-use one, orphans and exited ones; the engine then equals the pool', async () => {
    const first = await start()
    await first.berth.ready
    const pool1 = first.berth.pool!
    // Claimed outside any task, so nothing vouches for it after the restart: it must go.
    const inUse = await pool1.claim({ owner_id: 'usr_before_restart', purpose: 'batch' })
    await vi.waitFor(() => expect(pool1.stats()).toEqual(expectedStats({ in_use: 1, idle: 2 })), 15_000)
    const idleIds = pool1
      .list()
      .filter((c) => c.state === 'idle')
      .map((c) => c.engine_id)
      .sort()
    await stopKeeping(first)
    expect((await onEngine(runtime, name)).map((c) => c.id).sort()).toEqual(
      [...idleIds, inUse.container.engine_id].sort(),
    )

    // An orphan: managed, this pool's label, no record (e.g. created just before a crash).
    const orphan = await runtime.create({ image: info.image, cmd: [...IDLE_COMMAND], labels: { 'berth.pool': name } })
    await runtime.start(orphan.id)
    // An exited managed container, even with a record that claims it is idle.
    const exited = await runtime.create({
      image: info.image,
      cmd: ['true'],
      labels: { 'berth.pool': name, 'berth.container': 'ctr_exited0000000000' },
    })
    await runtime.start(exited.id)
    await vi.waitFor(async () => expect((await runtime.inspect(exited.id)).state).toBe('exited'), 15_000)
    const storage = fsStorage()
    const record = (id: string, engineId: string): PooledContainer => ({
      id,
      engine_id: engineId,
      state: 'idle',
      owner_id: null,
      workspace_id: null,
      purpose: null,
      created_at: new Date().toISOString(),
      claimed_at: null,
    })
    await storage.setItem(`pool:${name}:ctr_exited0000000000`, record('ctr_exited0000000000', exited.id) as never)
    // And a record whose container no longer exists.
    await storage.setItem(
      `pool:${name}:ctr_vanished000000000`,
      record('ctr_vanished000000000', 'f'.repeat(64)) as never,
    )
    await storage.dispose()

    second = await start()
    await second.berth.ready
    const pool2 = second.berth.pool!
    expect(pool2.stats()).toEqual(expectedStats({ in_use: 0, idle: 2 }))
    expect(
      pool2
        .list()
        .map((c) => c.engine_id)
        .sort(),
    ).toEqual(idleIds)
    expect(second.logs.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ msg: 'pool recovered', adopted: 2, removed: 3 }),
    )

    for (const id of [inUse.container.engine_id, orphan.id, exited.id]) expect(await gone(runtime, id)).toBe(true)
    const onEngineNow = await onEngine(runtime, name)
    expect(onEngineNow.map((c) => c.id).sort()).toEqual(idleIds)
    expect(onEngineNow.every((c) => c.state === 'running')).toBe(true)
    // Only the adopted containers keep a record.
    const keys = await second.berth.storage.getKeys(`pool:${name}`)
    expect(keys.sort()).toEqual(
      pool2
        .list()
        .map((c) => `pool:${name}:${c.id}`)
        .sort(),
    )

    expect((await clientFor(second).health()).pool).toEqual({ min: 2, max: 3, in_use: 0, idle: 2 })
    const listed = await clientFor(second, ADMIN_TOKEN).pool.containers.list()
    expect(listed.containers.map((c) => c.engine_id).sort()).toEqual(idleIds)

    // The adopted pool works as before: a claim takes an adopted container, warming replaces it.
    const lease = await pool2.claim({ owner_id: 'usr_after_restart', purpose: 'batch' })
    expect(idleIds).toContain(lease.container.engine_id)
    await lease.release()
    await vi.waitFor(async () => {
      expect(pool2.stats()).toEqual(expectedStats({ in_use: 0, idle: 2 }))
      expect((await onEngine(runtime, name)).map((c) => c.id).sort()).toEqual(
        pool2
          .list()
          .map((c) => c.engine_id)
          .sort(),
      )
    }, 15_000)
  })
})

describe.each(ENGINES)('pool restart with a changed spec on %s', { timeout: 90_000 }, (engine) => {
  const name = uniquePoolName(`respec-${engine}`)
  const dataDir = tempDataDir()
  const { info, runtime } = engineRuntime(engine)
  const fsStorage = () => createStorage({ driver: fsDriver({ base: join(dataDir, 'store') }) })
  const start = (mark: string) =>
    startServer({
      dataDir,
      storage: fsStorage(),
      runtime,
      pool: { image: info.image, min: 1, max: 2, name, spec: { env: { BERTH_TEST_SPEC: mark } } },
    })
  let second: TestServer | undefined
  afterAll(async () => {
    await closeRemoving(second, dataDir)
    expect(await sweep(runtime, name)).toBe(0)
  }, 60_000)

  it('removes idle containers made from another spec (an upgrade that mounts something new) instead of adopting them', async () => {
    const first = await start('one')
    await first.berth.ready
    await vi.waitFor(
      () => expect(first.berth.pool!.stats()).toEqual(expectedStats({ min: 1, max: 2, idle: 1 })),
      15_000,
    )
    const [old] = first.berth.pool!.list()
    await stopKeeping(first)
    second = await start('two')
    await second.berth.ready
    expect(second.logs.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ msg: 'pool recovered', adopted: 0, removed: 1 }),
    )
    expect(await gone(runtime, old!.engine_id)).toBe(true)
    // Warming makes one from the new spec.
    await vi.waitFor(
      () => expect(second!.berth.pool!.stats()).toEqual(expectedStats({ min: 1, max: 2, idle: 1 })),
      15_000,
    )
  })
})

describe('a server whose pool cannot start', () => {
  const dataDir = tempDataDir()
  const name = uniquePoolName('down')
  let s: TestServer | undefined
  let noImage: TestServer | undefined
  const noImageDir = tempDataDir()

  afterAll(async () => {
    await closeRemoving(s, dataDir)
    await closeRemoving(noImage, noImageDir)
  })

  it('rejects `ready` with CONTAINER_FAILED and keeps answering HTTP without 500s', async () => {
    const runtime = podmanRuntime({ socketPath: join(dataDir, 'no-engine.sock') })
    s = await startServer({ dataDir, runtime, pool: { image: 'localhost/berth-test:latest', min: 2, max: 3, name } })
    await expect(s.berth.ready).rejects.toMatchObject({ code: 'CONTAINER_FAILED', details: { reason: 'unreachable' } })
    expect(s.logs.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ level: 'error', msg: 'start-up failed' }),
    )

    expect(await clientFor(s).health()).toMatchObject({ ok: true, pool: { min: 2, max: 3, in_use: 0, idle: 0 } })
    const user = await s.user()
    await clientFor(s, user.token).pool.stats()
    const admin = clientFor(s, ADMIN_TOKEN)
    expect(await admin.pool.containers.list()).toEqual({ containers: [], total: 0, next_cursor: null })
    expect((await failure(admin.pool.containers.delete({ params: { id: 'ctr_nothere00000000' } }))).status).toBe(404)
    // A claim fails the same clear way instead of hanging.
    await expect(s.berth.pool!.claim({ owner_id: user.id, purpose: 'batch' })).rejects.toMatchObject({
      code: 'CONTAINER_FAILED',
    })
  })

  it('with a missing image: `ready` resolves (the engine answers), warming retries with backoff, HTTP serves', async () => {
    const { runtime } = engineRuntime('podman')
    const pool = uniquePoolName('no-image')
    noImage = await startServer({
      dataDir: noImageDir,
      runtime,
      pool: { image: 'localhost/berth-no-such-image:latest', min: 1, max: 2, name: pool },
    })
    await noImage.berth.ready
    const warnings = () => noImage!.logs.map((l) => JSON.parse(l)).filter((l) => l.msg === 'could not warm a container')
    expect(warnings()[0]).toMatchObject({ level: 'warn', retry_in_ms: 1000 })
    expect(warnings()[0].error).toContain('berth-no-such-image')
    await vi.waitFor(() => expect(warnings()[1]).toMatchObject({ retry_in_ms: 2000 }), 5_000)
    expect(await clientFor(noImage).health()).toMatchObject({ pool: { min: 1, max: 2, in_use: 0, idle: 0 } })
    expect(await onEngine(runtime, pool)).toEqual([])
  })
})
