/**
 * The redis coordination driver while Redis is down (issue 27): calls fail within the bound
 * with CoordinationUnavailableError, the state goes unreachable then unleased, and comes
 * back by itself, with `reset` only when Redis returned without the deployment's state.
 */
import { CoordinationUnavailableError, type Coordination, type CoordinationChange } from '@berth/core'
import { createCoordination } from '@berth/server'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { severableProxy, type SeverableProxy } from './redis-outage.helpers.js'

const LEASE_MS = 1_000
const TIMEOUT_MS = 500

let redis: LocalRedis | undefined
let proxy: SeverableProxy | undefined
let coord: Coordination | undefined
afterEach(async () => {
  await coord?.close()
  await proxy?.close()
  await redis?.stop()
  coord = proxy = redis = undefined
})

/** The driver on `url`, with every state change and warning it reports. */
async function open(url: string) {
  const changes: CoordinationChange[] = []
  const warnings: unknown[] = []
  const c = await createCoordination({
    driver: 'redis',
    url,
    prefix: 'outage:',
    leaseMs: LEASE_MS,
    commandTimeoutMs: TIMEOUT_MS,
    onError: (err) => warnings.push(err),
  })
  c.onStateChange((change) => changes.push(change))
  return { c, changes, warnings }
}

/** Every port call, each expected to reject with CoordinationUnavailableError. */
function calls(c: Coordination): (() => Promise<unknown>)[] {
  return [
    () => c.once.claimOnce('k', 1000),
    () => c.slots.acquire('p', 1, 'h', 1000),
    () => c.rates.take('r', { rpm: 60, burst: 1 }),
    () => c.instances.alive(),
    () => c.queue('tasks').add({ id: 'task_1', owner: 'usr_1', payload: {} }),
    () => c.queue('tasks').take(),
    () => c.pubsub.publish('ch', { a: 1 }),
    () => c.delayed.schedule('retries', 'd1', Date.now() + 1000, {}),
  ]
}

describe('redis coordination while Redis is down', () => {
  it('fails every call within the bound, goes unreachable then unleased, and comes back reset when Redis restarts empty', async () => {
    redis = await startRedis()
    const o = await open(redis.path)
    coord = o.c
    const c = o.c
    // Queues and pub/sub in use before the outage, as a running instance has them.
    await c.queue('tasks').counts()
    await c.pubsub.subscribe('ch', () => {})
    expect(c.state()).toMatchObject({ reachable: true, leased: true })

    await redis.kill()
    await vi.waitFor(() => expect(c.state().reachable).toBe(false), 5_000)
    for (const fn of calls(c)) {
      const started = performance.now()
      await expect(fn()).rejects.toBeInstanceOf(CoordinationUnavailableError)
      // Bounded, not hanging (a call queued until Redis returns would never settle here); the
      // margin is wide so a loaded machine does not fail it.
      expect(performance.now() - started).toBeLessThan(TIMEOUT_MS + 5_000)
    }
    await vi.waitFor(() => expect(c.state().leased).toBe(false), 5_000)
    // One warning for the outage, not one per reconnect attempt.
    await new Promise((r) => setTimeout(r, 1_000))
    expect(o.warnings).toHaveLength(1)
    expect(o.warnings[0]).toBeInstanceOf(CoordinationUnavailableError)

    o.changes.length = 0
    await redis.start()
    await vi.waitFor(() => expect(c.state()).toMatchObject({ reachable: true, leased: true }), 10_000)
    expect(o.changes.filter((ch) => ch.reset)).toHaveLength(1)
    expect(o.changes.at(-1)).toMatchObject({ reachable: true, leased: true, reset: true })
    // Re-registered, and working again.
    expect(await c.instances.alive()).toEqual([c.instanceId])
    expect(await c.once.claimOnce('after', 1000)).toBe(true)
  })

  it('comes back without a reset when Redis kept its state', async () => {
    redis = await startRedis()
    proxy = await severableProxy(redis.path)
    const o = await open(proxy.url)
    coord = o.c
    const c = o.c
    proxy.sever()
    await vi.waitFor(() => expect(c.state()).toMatchObject({ reachable: false, leased: false }), 5_000)
    await expect(c.once.get('k')).rejects.toBeInstanceOf(CoordinationUnavailableError)
    proxy.restore()
    await vi.waitFor(() => expect(c.state()).toMatchObject({ reachable: true, leased: true }), 10_000)
    expect(o.changes.length).toBeGreaterThan(1)
    expect(o.changes.some((ch) => ch.reset)).toBe(false)
    expect(await c.once.claimOnce('after', 1000)).toBe(true)
  })
})
