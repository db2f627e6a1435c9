/**
 * Metrics without a container: who may read `GET /metrics`, that it is off by default for
 * embedders, what the request, WebSocket, store and coordination observations export, that
 * free-form label values stay bounded, and the BERTH_METRICS* settings.
 */
import type { Coordination, CoordinationChange, Store } from '@berth/core'
import { configFromEnv, prometheusMetrics, serveMetrics } from '@berth/server'
import WebSocket from 'ws'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { countedStore, watchCoordination } from '../src/metrics/index.js'
import { ADMIN_TOKEN, startServer, type TestServer } from './helpers.js'

/** The value of one series in an exposition, or undefined when it is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

describe('GET /metrics on the main listener', () => {
  let s: TestServer
  beforeAll(async () => {
    s = await startServer({ metrics: true })
  })
  afterAll(async () => {
    await s?.close()
  })
  const scrape = async () => (await s.request('/metrics', { token: ADMIN_TOKEN })).text()

  it('answers the operator in the Prometheus text format; 401 without credentials, 403 for a caller', async () => {
    const res = await s.request('/metrics', { token: ADMIN_TOKEN })
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/)
    const text = await res.text()
    expect(text).toContain('# TYPE berth_http_requests_total counter')
    expect(text).toContain('# TYPE process_cpu_user_seconds_total counter')
    expect(text).toMatch(/^berth_build_info\{version="\d+\.\d+\.\d+[^"]*"\} 1$/m)
    expect((await s.request('/metrics')).status).toBe(401)
    const { token } = await s.user('Caller')
    const refused = await s.request('/metrics', { token })
    expect(refused.status).toBe(403)
    expect(await refused.json()).toMatchObject({ code: 'FORBIDDEN' })
  })

  it('labels requests by route name, and one label for requests no route answers (never the path)', async () => {
    expect((await s.request('/health')).status).toBe(200)
    expect((await s.request('/v1/nothing-here/usr_0123456789abcdefghij', { token: ADMIN_TOKEN })).status).toBe(404)
    const text = await scrape()
    expect(sample(text, 'berth_http_requests_total{route="health",method="GET",status="200"}')).toBeGreaterThanOrEqual(
      1,
    )
    expect(sample(text, 'berth_http_requests_total{route="unmatched",method="GET",status="404"}')).toBe(1)
    expect(text).toContain('berth_http_request_duration_seconds_bucket{le="0.005",route="health",method="GET"}')
    expect(text).not.toContain('nothing-here')
    expect(text).not.toContain('usr_')
  })

  it('counts WebSocket connections and messages by type', async () => {
    const { token } = await s.user('Socket user')
    const socket = new WebSocket(`${s.url.replace('http', 'ws')}/v1/ws`, {
      headers: { authorization: `Bearer ${token}` },
    })
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
    const pong = new Promise((resolve) => socket.once('message', resolve))
    socket.send(JSON.stringify({ type: 'ping' }))
    await pong
    let text = await scrape()
    expect(sample(text, 'berth_websocket_connections')).toBe(1)
    expect(sample(text, 'berth_websocket_messages_total{direction="in",type="ping"}')).toBe(1)
    expect(sample(text, 'berth_websocket_messages_total{direction="out",type="pong"}')).toBe(1)
    socket.close()
    await vi.waitFor(async () => {
      text = await scrape()
      expect(sample(text, 'berth_websocket_connections')).toBe(0)
    })
  })
})

describe('metrics off', () => {
  it('embedders get none by default: GET /metrics is a 404 even for the operator', async () => {
    const s = await startServer()
    try {
      const res = await s.request('/metrics', { token: ADMIN_TOKEN })
      expect(res.status).toBe(404)
      expect(await res.json()).toMatchObject({ code: 'NOT_FOUND' })
    } finally {
      await s.close()
    }
  })
})

describe('the separate scrape listener', () => {
  it('serves GET /metrics without credentials, and nothing else', async () => {
    const metrics = prometheusMetrics({ processMetrics: false })
    metrics.taskStarted({ mode: 'batch', queuedSeconds: 0.2 })
    const listener = await serveMetrics(metrics, { host: '127.0.0.1', port: 0 })
    try {
      const res = await fetch(`${listener.url}/metrics`)
      expect(res.status).toBe(200)
      expect(sample(await res.text(), 'berth_tasks_started_total{mode="batch"}')).toBe(1)
      expect((await fetch(`${listener.url}/health`)).status).toBe(404)
      expect((await fetch(`${listener.url}/metrics`, { method: 'POST' })).status).toBe(404)
    } finally {
      await listener.close()
    }
  })
})

describe('label values stay bounded', () => {
  it('model names are capped in number and checked for shape; error codes come from the fixed list', async () => {
    const metrics = prometheusMetrics({ processMetrics: false })
    const usage = {
      provider: 'anthropic',
      input_tokens: 1,
      output_tokens: 1,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
    }
    for (let i = 0; i < 150; i++) metrics.modelUsage({ ...usage, model: `model-${i}`, cost_usd: 0.01 })
    metrics.modelUsage({ ...usage, model: 'a model with "quotes" and spaces', cost_usd: 0.01 })
    metrics.taskEnded({ mode: 'batch', status: 'failed', code: 'not a code: task_123', seconds: 1 })
    const text = (await metrics.exposition()).body
    const models = new Set([...text.matchAll(/berth_model_cost_usd_total\{[^}]*model="([^"]*)"/g)].map((m) => m[1]))
    expect(models.size).toBe(101)
    expect(models.has('other')).toBe(true)
    expect(models.has('model-99')).toBe(true)
    expect(models.has('model-100')).toBe(false)
    expect(sample(text, 'berth_model_cost_usd_total{provider="anthropic",model="other"}')).toBeCloseTo(0.51)
    expect(text).toContain('berth_tasks_ended_total{mode="batch",status="failed",code="OTHER"} 1')
    expect(text).not.toContain('task_123')
  })
})

describe('store and coordination errors', () => {
  it('a failed store call is counted by its operation and still rejects', async () => {
    const metrics = prometheusMetrics({ processMetrics: false })
    const broken = { get: () => Promise.reject(new Error('disk gone')), keys: async () => ['a:1'] } as unknown as Store
    const store = countedStore(broken, metrics)
    await expect(store.get('a:1')).rejects.toThrow('disk gone')
    expect(await store.keys('a:')).toEqual(['a:1'])
    const text = (await metrics.exposition()).body
    expect(sample(text, 'berth_store_errors_total{operation="get"}')).toBe(1)
    expect(sample(text, 'berth_store_errors_total{operation="keys"}')).toBeUndefined()
  })

  it('a driver with private fields works through it, counted methods and extras alike', async () => {
    class Driver {
      #closed = false
      async get(key: string) {
        if (this.#closed) throw new Error('closed')
        return key
      }
      async close() {
        this.#closed = true
      }
    }
    const metrics = prometheusMetrics({ processMetrics: false })
    const store = countedStore(new Driver() as unknown as Store, metrics)
    expect(await store.get('k')).toBe('k')
    await store.close?.()
    await expect(store.get('k')).rejects.toThrow('closed')
    expect(sample((await metrics.exposition()).body, 'berth_store_errors_total{operation="get"}')).toBe(1)
  })

  it('the coordination backend going unreachable, losing the lease or resetting is counted', async () => {
    const metrics = prometheusMetrics({ processMetrics: false })
    let handler: ((c: CoordinationChange) => void) | undefined
    const coordination = {
      state: () => ({ reachable: true, leased: true, since: 0 }),
      onStateChange: (h: (c: CoordinationChange) => void) => {
        handler = h
        return () => {
          handler = undefined
        }
      },
    } as unknown as Coordination
    const stop = watchCoordination(coordination, metrics)
    handler!({ reachable: false, leased: true, since: 1, reset: false })
    handler!({ reachable: false, leased: false, since: 2, reset: false })
    handler!({ reachable: true, leased: true, since: 3, reset: true })
    stop()
    expect(handler).toBeUndefined()
    const text = (await metrics.exposition()).body
    expect(sample(text, 'berth_coordination_errors_total{kind="unreachable"}')).toBe(1)
    expect(sample(text, 'berth_coordination_errors_total{kind="lease_lost"}')).toBe(1)
    expect(sample(text, 'berth_coordination_errors_total{kind="reset"}')).toBe(1)
  })
})

describe('BERTH_METRICS and BERTH_METRICS_LISTEN', () => {
  it('the standalone server has metrics on, on the main listener, unless told otherwise', () => {
    expect(configFromEnv({})).toMatchObject({ metrics: true, metricsListen: undefined })
    expect(configFromEnv({ BERTH_METRICS: 'off' }).metrics).toBe(false)
    expect(configFromEnv({ BERTH_METRICS_LISTEN: '10.0.0.5:9464' }).metricsListen).toEqual({
      host: '10.0.0.5',
      port: 9464,
    })
    expect(configFromEnv({ BERTH_METRICS_LISTEN: '[::1]:9464' }).metricsListen).toEqual({ host: '::1', port: 9464 })
  })

  it('refuses a malformed address, and a listener with metrics off', () => {
    expect(() => configFromEnv({ BERTH_METRICS: 'yes' })).toThrow(/BERTH_METRICS/)
    expect(() => configFromEnv({ BERTH_METRICS_LISTEN: '9464' })).toThrow(/BERTH_METRICS_LISTEN must be host:port/)
    expect(() => configFromEnv({ BERTH_METRICS_LISTEN: 'host:70000' })).toThrow(/host:port/)
    expect(() => configFromEnv({ BERTH_METRICS: 'off', BERTH_METRICS_LISTEN: '127.0.0.1:9464' })).toThrow(
      /BERTH_METRICS is off/,
    )
  })
})
