import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { createServer, connect, type Server } from 'node:net'
import { join } from 'node:path'
import { request } from 'node:http'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { dockerRuntime } from '@berth/adapter-docker'
import { podmanRuntime } from '@berth/adapter-podman'
import { collectExec, defaultPoolName, type Lease } from '@berth/core'
import { busyboxRecipe } from '@berth/testkit'
import { startServer, type TestServer } from './helpers.js'
import { ENGINES, closeRemoving, engineRuntime, onEngine, sweep, tempDataDir, uniquePoolName } from './pool.helpers.js'

/** A local port nothing listens on: a "registry" every pull fails against, without leaving the machine. */
async function closedPort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const { port } = srv.address() as { port: number }
  await new Promise<void>((r) => srv.close(() => r()))
  return port
}

/** Remove an image through the engine's API (no engine client in this package). */
function removeImage(socketPath: string, ref: string): Promise<void> {
  return new Promise((resolve) => {
    const req = request(
      { socketPath, method: 'DELETE', path: `/images/${encodeURIComponent(ref)}?force=true` },
      (res) => {
        res.resume()
        res.on('end', () => resolve())
      },
    )
    req.on('error', () => resolve())
    req.end()
  })
}

const parsedLogs = (s: TestServer) => s.logs.map((l) => JSON.parse(l) as Record<string, unknown> & { msg: string })

/**
 * An engine socket that is not there until `listen()`, then answers every request with a
 * 500 until `answer()`, then passes bytes through to the real engine socket.
 */
function flakyEngine(path: string, target: string) {
  let mode: 'fail' | 'proxy' = 'fail'
  let server: Server | undefined
  const body = '{"message":"engine is starting"}'
  return {
    async listen() {
      server = createServer((client) => {
        if (mode === 'fail') {
          client.once('data', () =>
            client.end(
              `HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
            ),
          )
          client.on('error', () => {})
          return
        }
        const upstream = connect(target)
        client.pipe(upstream).pipe(client)
        upstream.on('error', () => client.destroy())
        client.on('error', () => upstream.destroy())
      })
      await new Promise<void>((r) => server!.listen(path, r))
    },
    answer() {
      mode = 'proxy'
    },
    async close() {
      await new Promise<void>((r) => (server ? server.close(() => r()) : r()))
    },
  }
}

describe.each(ENGINES)('a missing pool image on %s', { timeout: 120_000 }, (engine) => {
  const { info, runtime } = engineRuntime(engine)
  const name = uniquePoolName(`image-${engine}`)
  const dataDir = tempDataDir()
  let s: TestServer | undefined
  let ref = ''

  afterAll(async () => {
    await closeRemoving(s, dataDir)
    expect(await sweep(runtime, name)).toBe(0)
    if (ref) await removeImage(info.socketPath, ref)
  })

  it('is built once from the recipe (no registry answers) while warm-up and claims wait for it; /health shows it ready', async () => {
    ref = `127.0.0.1:${await closedPort()}/berth-pool-image-${randomBytes(4).toString('hex')}:latest`
    const recipe = busyboxRecipe(`pool-${name}`, 'pool image')
    s = await startServer({ dataDir, runtime, pool: { image: ref, min: 2, max: 4, name, imageRecipe: recipe } })
    const pool = s.berth.pool!
    // Claims at once, while start-up (and the warm-up) provision the same image.
    const claims = [
      pool.claim({ owner_id: 'usr_a', purpose: 'batch' }),
      pool.claim({ owner_id: 'usr_b', purpose: 'batch' }),
    ]
    await s.berth.ready
    const leases: Lease[] = await Promise.all(claims)
    await vi.waitFor(() => expect(pool.stats()).toMatchObject({ in_use: 2, idle: 2 }), 15_000)
    expect(recipe.builds).toBe(1)

    const logs = parsedLogs(s)
    const building = logs.filter((l) => l.msg.includes('no registry has it'))
    expect(building).toHaveLength(1)
    expect(building[0]!.msg).toContain(`building it from busybox with marker pool image (recipe pool-${name})`)
    expect(logs.filter((l) => l.msg.startsWith(`image ${ref} built in `))).toHaveLength(1)

    const health = await (await s.request('/health')).json()
    expect(health.engine).toEqual({ name: engine, reachable: true, image: { ref, state: 'ready' } })

    const containers = await onEngine(runtime, name)
    expect(containers).toHaveLength(4)
    expect(containers.every((c) => c.state === 'running')).toBe(true)
    const out = await collectExec(await runtime.exec(leases[0]!.container.engine_id, { cmd: ['cat', '/marker'] }))
    expect(out.stdout).toBe('pool image')
  })
})

describe.each(ENGINES)('an engine that does not answer at start, on %s', { timeout: 120_000 }, (engine) => {
  const { info, runtime: real } = engineRuntime(engine)
  const name = uniquePoolName(`late-${engine}`)
  const dataDir = tempDataDir()
  const socketPath = join(dataDir, 'engine.sock')
  const flaky = flakyEngine(socketPath, info.socketPath)
  let s: TestServer | undefined

  afterAll(async () => {
    await closeRemoving(s, dataDir)
    await flaky.close()
    expect(await sweep(real, name)).toBe(0)
  })

  it('is retried with backoff: claims fail fast meanwhile, /health goes from down to up, then the pool recovers and warms', async () => {
    const runtime = engine === 'docker' ? dockerRuntime({ socketPath }) : podmanRuntime({ socketPath })
    s = await startServer({
      dataDir,
      runtime,
      pool: { image: info.image, min: 2, max: 3, name, retry: { initialMs: 100, maxMs: 400 } },
    })
    await expect(s.berth.ready).rejects.toMatchObject({ code: 'CONTAINER_FAILED', details: { reason: 'unreachable' } })
    const health = async () => (await s!.request('/health')).json()
    const down = await health()
    expect(down.engine).toMatchObject({
      name: engine,
      reachable: false,
      last_error: expect.stringContaining('unreachable'),
    })
    expect(down.pool).toEqual({ min: 2, max: 3, in_use: 0, idle: 0 })
    // A claim does not wait for the engine: it fails at once, and says why.
    await expect(s.berth.pool!.claim({ owner_id: 'usr_early', purpose: 'batch' })).rejects.toMatchObject({
      code: 'CONTAINER_FAILED',
      message: expect.stringMatching(new RegExp(`The ${engine} engine is not answering .*retrying`)),
    })

    // The socket appears but the engine answers 500: still down, with the engine's words.
    await flaky.listen()
    await vi.waitFor(
      async () =>
        expect((await health()).engine).toMatchObject({
          reachable: false,
          last_error: expect.stringContaining('engine is starting'),
        }),
      15_000,
    )
    expect(await onEngine(real, name)).toEqual([])

    // The engine answers: recovery, warm-up and claims work without a restart.
    flaky.answer()
    await vi.waitFor(async () => {
      const up = await health()
      expect(up.engine).toEqual({ name: engine, reachable: true, image: { ref: info.image, state: 'ready' } })
      expect(up.pool).toEqual({ min: 2, max: 3, in_use: 0, idle: 2 })
    }, 15_000)
    const warm = await onEngine(real, name)
    expect(warm.map((c) => c.id).sort()).toEqual(
      s.berth
        .pool!.list()
        .map((c) => c.engine_id)
        .sort(),
    )
    const retries = parsedLogs(s)
      .filter((l) => l.msg === 'container engine does not answer')
      .map((l) => l.retry_in_ms)
    // Capped exponential backoff: 100, 200, 400, 400, ... (as many as it took).
    expect(retries.length).toBeGreaterThanOrEqual(2)
    expect(retries).toEqual(retries.map((_, i) => Math.min(400, 100 * 2 ** i)))
    expect(parsedLogs(s)).toContainEqual(expect.objectContaining({ msg: 'container engine answers', runtime: engine }))
    const lease = await s.berth.pool!.claim({ owner_id: 'usr_late', purpose: 'batch' })
    expect(warm.map((c) => c.id)).toContain(lease.container.engine_id)
    await lease.release()
  })
})

describe.each(ENGINES)('two servers on one %s engine', { timeout: 120_000 }, (engine) => {
  const { info, runtime } = engineRuntime(engine)
  const dirs = { a: tempDataDir(), b: tempDataDir() }
  const names = { a: defaultPoolName(dirs.a), b: defaultPoolName(dirs.b) }
  const servers: Partial<Record<'a' | 'b', TestServer>> = {}
  // A server restarted on its data dir: fs storage there, the default pool name (not passed).
  const start = async (which: 'a' | 'b') => {
    const storage = createStorage({ driver: fsDriver({ base: join(dirs[which], 'store') }) })
    servers[which] = await startServer({
      dataDir: dirs[which],
      storage,
      runtime,
      pool: { image: info.image, min: 2, max: 3 },
    })
    await servers[which]!.berth.ready
    return servers[which]!
  }
  const stopKeeping = async (which: 'a' | 'b') => {
    const s = servers[which]!
    delete servers[which]
    s.server.closeAllConnections()
    await new Promise<void>((r) => s.server.close(() => r()))
    await s.berth.close()
  }
  const running = async (which: 'a' | 'b') =>
    (await onEngine(runtime, names[which]))
      .filter((c) => c.state === 'running')
      .map((c) => c.id)
      .sort()

  afterAll(async () => {
    for (const which of ['a', 'b'] as const) {
      if (servers[which]) await servers[which]!.berth.close({ removeContainers: true })
      servers[which]?.server.close()
      expect(await sweep(runtime, names[which])).toBe(0)
      rmSync(dirs[which], { recursive: true, force: true })
    }
  })

  it("each keeps its warm containers across the other's start, recovery and close", async () => {
    expect(names.a).not.toBe(names.b)
    const a = await start('a')
    const aIds = a.berth
      .pool!.list()
      .map((c) => c.engine_id)
      .sort()
    expect(aIds).toHaveLength(2)
    expect(await running('a')).toEqual(aIds)

    // B starts (its recovery sweeps its own pool) and warms its own.
    const b = await start('b')
    const bIds = b.berth
      .pool!.list()
      .map((c) => c.engine_id)
      .sort()
    expect(bIds).toHaveLength(2)
    expect(await running('b')).toEqual(bIds)
    expect(await running('a')).toEqual(aIds)
    expect(a.berth.pool!.stats()).toMatchObject({ idle: 2, in_use: 0 })

    // B restarts: it adopts its own two and leaves A's alone.
    await stopKeeping('b')
    expect(await running('a')).toEqual(aIds)
    const b2 = await start('b')
    expect(parsedLogs(b2)).toContainEqual(
      expect.objectContaining({ msg: 'pool recovered', pool: names.b, adopted: 2, removed: 0 }),
    )
    expect(
      b2.berth
        .pool!.list()
        .map((c) => c.engine_id)
        .sort(),
    ).toEqual(bIds)
    expect(await running('a')).toEqual(aIds)

    // A closes and removes its containers: B's stay.
    await servers.a!.berth.close({ removeContainers: true })
    servers.a!.server.close()
    delete servers.a
    expect(await running('a')).toEqual([])
    expect(await running('b')).toEqual(bIds)
    expect(b2.berth.pool!.stats()).toMatchObject({ idle: 2, in_use: 0 })
  })
})
