import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  collectExec,
  isContainerError,
  type ContainerPool,
  type ContainerRuntime,
  type ContainerSpec,
  type Lease,
} from '@berth/core'
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

const LIMITS = { memoryBytes: 256 * 1024 ** 2, cpus: 0.5, pids: 128 }

/** Whether a container is gone from the engine (inspect says not_found). */
async function goneFromEngine(runtime: ContainerRuntime, engineId: string): Promise<boolean> {
  try {
    await runtime.inspect(engineId)
    return false
  } catch (err) {
    if (isContainerError(err, 'not_found')) return true
    throw err
  }
}

describe.each(ENGINES)('warm pool over HTTP on %s', { timeout: 60_000 }, (engine) => {
  const name = uniquePoolName(engine)
  const dataDir = tempDataDir()
  let runtime: ContainerRuntime
  let creates: ContainerSpec[]
  let s: TestServer
  let pool: ContainerPool

  /** The steady state every test starts from and returns to: 2 warm, none in use, engine = pool. */
  const settled = () =>
    vi.waitFor(async () => {
      expect(pool.stats()).toEqual(expectedStats({}))
      const engineIds = (await onEngine(runtime, name)).map((c) => c.id).sort()
      expect(engineIds).toEqual(
        pool
          .list()
          .map((c) => c.engine_id)
          .sort(),
      )
    }, 15_000)

  beforeAll(async () => {
    const e = engineRuntime(engine)
    ;({ runtime, creates } = e)
    const { info } = e
    s = await startServer({
      dataDir,
      runtime,
      pool: { image: info.image, min: 2, max: 3, name, spec: { limits: LIMITS, labels: { 'berth.suite': 'pool' } } },
    })
    await s.berth.ready
    pool = s.berth.pool!
  }, 120_000)

  afterAll(async () => {
    await closeRemoving(s, dataDir)
    // Nothing of this pool may outlive the suite; a leftover here is a bug in the removal.
    expect(await sweep(runtime, name)).toBe(0)
  }, 60_000)

  it('warms up to min: /health, GET /v1/pool and the engine agree', async () => {
    expect((await clientFor(s).health()).pool).toEqual({ min: 2, max: 3, in_use: 0, idle: 2 })

    const user = await s.user('stats reader')
    expect(await clientFor(s, user.token).pool.stats()).toEqual({ min: 2, max: 3, in_use: 0, idle: 2 })
    expect((await failure(clientFor(s).pool.stats())).status).toBe(401)

    const found = await onEngine(runtime, name)
    expect(found).toHaveLength(2)
    expect(found.every((c) => c.state === 'running' && c.labels['berth.managed'] === 'true')).toBe(true)
    expect(found.map((c) => c.id).sort()).toEqual(
      pool
        .list()
        .map((c) => c.engine_id)
        .sort(),
    )
  })

  it('hardens pooled containers: limits, labels, dropped capabilities, no-new-privileges', async () => {
    const [c] = pool.list()
    const info = await runtime.inspect(c!.engine_id)
    expect(info.running).toBe(true)
    expect(info.limits).toEqual(LIMITS)
    expect(info.labels).toMatchObject({
      'berth.managed': 'true',
      'berth.pool': name,
      'berth.container': c!.id,
      'berth.suite': 'pool',
    })
    // Warm containers belong to nobody until claimed.
    expect(info.labels['berth.owner']).toBeUndefined()
    const status = await collectExec(await runtime.exec(c!.engine_id, { cmd: ['cat', '/proc/self/status'] }))
    expect(status.exitCode).toBe(0)
    // CHOWN, DAC_OVERRIDE, FOWNER, KILL, SETGID, SETUID: bits 0, 1, 3, 5, 6, 7.
    // Commands run as the agent user, with no capabilities at all; the bounding set (what
    // Berth's own root housekeeping keeps) is CHOWN, DAC_OVERRIDE, FOWNER, KILL, SETGID, SETUID.
    expect(status.stdout).toMatch(/^Uid:\s+1000\s/m)
    expect(status.stdout).toMatch(/^CapEff:\s+0+$/m)
    expect(status.stdout).toMatch(/^CapBnd:\s+0*eb$/m)
    const root = await collectExec(await runtime.exec(c!.engine_id, { cmd: ['cat', '/proc/self/status'], user: '0' }))
    expect(root.stdout).toMatch(/^CapEff:\s+0*eb$/m)
    expect(status.stdout).toMatch(/^NoNewPrivs:\s+1$/m)
  })

  it('a claim takes a warm container without creating one; the pool refills to min in the background', async () => {
    await settled()
    const warm = pool.list().map((c) => c.engine_id)
    const before = creates.length
    const lease = await pool.claim({ owner_id: 'usr_claimer', purpose: 'batch' })
    expect(warm).toContain(lease.container.engine_id)
    expect(lease.container).toMatchObject({ state: 'in_use', owner_id: 'usr_claimer', purpose: 'batch' })
    // Whatever was created since is a warm-up (no owner label), never a creation for the claim.
    expect(creates.slice(before).every((spec) => spec.labels?.['berth.owner'] === undefined)).toBe(true)
    expect(pool.stats()).toEqual(expectedStats({ in_use: 1, idle: 1 }))

    await vi.waitFor(() => expect(pool.stats()).toEqual(expectedStats({ in_use: 1, idle: 2 })), 15_000)
    expect(creates.length).toBe(before + 1)
    expect(await onEngine(runtime, name)).toHaveLength(3)

    // Release reaps: the container leaves the engine, it is never handed to anyone else.
    await lease.release()
    expect(await goneFromEngine(runtime, lease.container.engine_id)).toBe(true)
    expect(pool.list().map((c) => c.id)).not.toContain(lease.container.id)
    await lease.release() // idempotent
    await settled()
  })

  it('at max, claims wait and are served by priority, then the owner holding fewer, then arrival; an aborted claim leaves the queue', async () => {
    await settled()
    const a1 = await pool.claim({ owner_id: 'usr_u1', purpose: 'batch' })
    const a2 = await pool.claim({ owner_id: 'usr_u1', purpose: 'batch' })
    const b1 = await pool.claim({ owner_id: 'usr_u2', purpose: 'batch' })
    expect(pool.stats()).toEqual(expectedStats({ in_use: 3, idle: 0 }))

    const served: string[] = []
    const leases = new Map<string, Lease>()
    const wait = (label: string, owner: string, priority: 'low' | 'normal' | 'high', signal?: AbortSignal) => {
      const p = pool.claim({ owner_id: owner, purpose: 'batch', priority, ...(signal && { signal }) })
      p.then(
        (lease) => {
          served.push(label)
          leases.set(label, lease)
        },
        () => {},
      )
      return p
    }
    const abort = new AbortController()
    // Arrival order; the aborted one would otherwise come first (high, earliest).
    const aborted = wait('abortedU5', 'usr_u5', 'high', abort.signal)
    wait('lowU3', 'usr_u3', 'low')
    wait('normalU1', 'usr_u1', 'normal')
    wait('normalU2', 'usr_u2', 'normal')
    wait('highU1', 'usr_u1', 'high')
    wait('normalU4', 'usr_u4', 'normal')
    abort.abort()
    await expect(aborted).rejects.toMatchObject({ name: 'AbortError' })

    // Nothing frees up, so nothing is served and nothing beyond max is created. Not a sleep:
    // each release below must serve exactly one claim, and the full order is checked at the
    // end, so a claim served early (or a fourth container) shows up there.
    expect(served).toEqual([])
    expect(await onEngine(runtime, name)).toHaveLength(3)

    /** Release one lease; exactly the next expected claim is served from the freed capacity. */
    const releaseThenServed = async (lease: Lease, expected: string) => {
      const count = served.length
      await lease.release()
      await vi.waitFor(() => expect(served.length).toBe(count + 1), 15_000)
      expect(served.at(-1)).toBe(expected)
      expect(pool.stats().in_use).toBe(3)
      expect((await onEngine(runtime, name)).length).toBeLessThanOrEqual(3)
    }
    await releaseThenServed(a1, 'highU1') // high before everything
    await releaseThenServed(b1, 'normalU2') // u2 holds 0, u1 holds 2 (normalU1 arrived earlier)
    await releaseThenServed(a2, 'normalU4') // u4 holds 0 < u1's 1
    await releaseThenServed(leases.get('highU1')!, 'normalU1') // normal before low
    await releaseThenServed(leases.get('normalU2')!, 'lowU3')
    expect(served).toEqual(['highU1', 'normalU2', 'normalU4', 'normalU1', 'lowU3'])
    expect(leases.get('normalU1')!.container.owner_id).toBe('usr_u1')

    await Promise.all([...leases.values()].map((l) => l.release()))
    await settled()
  })

  it('GET /v1/pool/containers: an admin sees all, a user only the containers claimed for them', async () => {
    await settled()
    const u1 = await s.user('owner one')
    const u2 = await s.user('owner two')
    const lease = await pool.claim({ owner_id: u1.id, purpose: 'session' })
    await vi.waitFor(() => expect(pool.stats()).toEqual(expectedStats({ in_use: 1, idle: 2 })), 15_000)

    const list = (token: string, query?: { limit: number; page: number }) =>
      clientFor(s, token).pool.containers.list({ query })
    const admin = await list(ADMIN_TOKEN)
    expect(admin.total).toBe(3)
    expect(admin.containers.map((c) => c.engine_id).sort()).toEqual(
      (await onEngine(runtime, name)).map((c) => c.id).sort(),
    )

    const mine = await list(u1.token)
    expect(mine).toEqual({
      containers: [
        expect.objectContaining({ id: lease.container.id, state: 'in_use', owner_id: u1.id, purpose: 'session' }),
      ],
      total: 1,
      next_cursor: null,
    })
    expect(await list(u2.token)).toEqual({ containers: [], total: 0, next_cursor: null })
    expect((await list(ADMIN_TOKEN, { limit: 1, page: 2 })).containers).toHaveLength(1)

    await lease.release()
    await settled()
  })

  it('DELETE /v1/pool/containers/:id: 204 for an admin (gone from the engine), 403 for a user, 404 unknown or repeated', async () => {
    await settled()
    const u1 = await s.user('holder')
    const lease = await pool.claim({ owner_id: u1.id, purpose: 'batch' })
    const remove = (token: string, id: string) => clientFor(s, token).pool.containers.delete({ params: { id } })

    const forbidden = await failure(remove(u1.token, lease.container.id))
    expect(forbidden.status).toBe(403)
    expect(forbidden.code).toBe('FORBIDDEN')
    expect(await goneFromEngine(runtime, lease.container.engine_id)).toBe(false)

    await remove(ADMIN_TOKEN, lease.container.id)
    expect(await goneFromEngine(runtime, lease.container.engine_id)).toBe(true)
    expect(pool.list().map((c) => c.id)).not.toContain(lease.container.id)

    const again = await failure(remove(ADMIN_TOKEN, lease.container.id))
    expect(again.status).toBe(404)
    expect(again.code).toBe('NOT_FOUND')
    expect((await failure(remove(ADMIN_TOKEN, 'ctr_doesnotexist0000'))).status).toBe(404)
    await lease.release() // the holder's release after a force-remove is harmless

    // An idle container can be force-removed too; the pool warms a replacement.
    const idle = pool.list().find((c) => c.state === 'idle')!
    await remove(ADMIN_TOKEN, idle.id)
    expect(await goneFromEngine(runtime, idle.engine_id)).toBe(true)
    await settled()
  })
})
