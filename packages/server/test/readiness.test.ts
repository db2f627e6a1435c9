/** `GET /health/ready` and the store/coordination parts of `/health` on one instance (issue 28, readiness). */
import type { Store } from '@berth/core'
import { memoryStore } from '@berth/server'
import { afterEach, describe, expect, it } from 'vitest'
import { startServer, type TestServer } from './helpers.js'

let s: TestServer | undefined
afterEach(async () => {
  await s?.close()
  s = undefined
})

describe('readiness', () => {
  it('is ready on a fresh instance, and answers 503 with the checks once draining', async () => {
    s = await startServer()
    const ready = await s.request('/health/ready')
    expect(ready.status).toBe(200)
    expect(await ready.json()).toEqual({
      ready: true,
      checks: { store: true, coordination: true, engine: true, draining: true },
    })
    const health = await (await s.request('/health')).json()
    expect(health).toMatchObject({ ok: true, coordination: { driver: 'memory', reachable: true, leased: true } })
    expect(health.store).toMatchObject({ reachable: true })

    s.berth.drain()
    const draining = await s.request('/health/ready')
    expect(draining.status).toBe(503)
    expect(draining.headers.get('retry-after')).toBe('5')
    expect(await draining.json()).toMatchObject({
      code: 'SERVICE_UNAVAILABLE',
      details: { checks: { draining: false } },
    })
    // Liveness is unchanged.
    expect((await s.request('/health')).status).toBe(200)
  })

  it('is not ready while the store does not answer its ping', async () => {
    let down = false
    const base = memoryStore()
    const store: Store = {
      ...base,
      driver: 'memory',
      ping: async () => {
        if (down) throw new Error('connection refused')
      },
    }
    // `storage: undefined` so the store given is the one used.
    s = await startServer({ store, storage: undefined })
    expect((await s.request('/health/ready')).status).toBe(200)
    down = true
    const res = await s.request('/health/ready')
    expect(res.status).toBe(503)
    expect(await res.json()).toMatchObject({ details: { checks: { store: false, coordination: true } } })
    const health = await (await s.request('/health')).json()
    expect(health.store).toEqual({ driver: 'memory', reachable: false, last_error: 'connection refused' })
  })
})
