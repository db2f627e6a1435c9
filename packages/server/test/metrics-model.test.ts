/**
 * Model usage and deliveries in the metrics: one task on an Anthropic credential whose
 * `base_url` is the offline model (so every model call goes through the credential broker's
 * gateway, where tokens and cost are metered), with a webhook integration told of its end.
 * The exposition then counts the model's tokens and cost by provider and model, and the
 * delivery by channel and outcome, and holds neither the model key nor the webhook address.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { ADMIN_TOKEN, clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { sweep, uniquePoolName } from './pool.helpers.js'
import { startReceiver } from './receivers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

const MODEL_KEY = 'sk-ant-api03-METRICSKEY-4h7j2k9l1m'
const MODEL = 'claude-sonnet-4-5'

/** The value of one series in an exposition, or undefined when it is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

describe('model usage and deliveries in the metrics', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-metrics-model-'))
  const pool = uniquePoolName('metrics-model')
  const runtime = localRuntime({ baseDir: join(dir, 'local'), logger: silentLogger, sandbox: 'bwrap' })
  let upstream: OfflineModelServer
  let receiver: Awaited<ReturnType<typeof startReceiver>>
  let s: TestServer
  beforeAll(async () => {
    upstream = await startOfflineModel({ apiKey: MODEL_KEY })
    receiver = await startReceiver()
    s = await startServer({
      dataDir: join(dir, 'data'),
      runtime,
      pool: { image: 'local', min: 0, max: 2, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
      // The fake provider and the webhook receiver listen on loopback.
      allowPrivateWebhooks: true,
      metrics: true,
    })
    await s.berth.ready
  })
  afterAll(async () => {
    await s?.close()
    await upstream?.close()
    await receiver?.close()
    await sweep(runtime, pool)
    rmSync(dir, { recursive: true, force: true })
  })

  it('counts the gateway-metered tokens and cost by provider and model, and the delivery by channel and outcome', async () => {
    const { token } = await s.user()
    const api = clientFor(s, token)
    const key = await api.apiKeys.create({
      body: { name: 'prod', provider: 'anthropic', key: MODEL_KEY, base_url: upstream.url },
    })
    const profile = await api.profiles.create({
      body: { name: 'Agent', slug: 'agent', api_key_id: key.id, model: MODEL },
    })
    await api.integrations.create({ body: { type: 'webhook', config: { url: receiver.url } } })
    const submitted = await api.tasks.submit({
      body: { mode: 'batch', profile_id: profile.id, prompt: 'Answer. [[berth:text Counted.]]' },
    })
    const task = await waitForTask(api, submitted.task_id, { timeout: 90_000 })
    expect(task.status).toBe('completed')
    let text = ''
    await vi.waitFor(
      async () => {
        text = await (await s.request('/metrics', { token: ADMIN_TOKEN })).text()
        expect(sample(text, 'berth_notification_deliveries_total{channel="webhook",outcome="succeeded"}')).toBe(1)
      },
      { timeout: 15_000 },
    )
    const tokens = (kind: string) =>
      sample(text, `berth_model_tokens_total{provider="anthropic",model="${MODEL}",kind="${kind}"}`)
    expect(tokens('input')).toBeGreaterThan(0)
    expect(tokens('output')).toBeGreaterThan(0)
    expect(tokens('cache_read')).toBeGreaterThanOrEqual(0)
    expect(sample(text, `berth_model_cost_usd_total{provider="anthropic",model="${MODEL}"}`)).toBeGreaterThan(0)
    expect(sample(text, 'berth_notification_delivery_seconds_count{channel="webhook"}')).toBe(1)
    expect(text).not.toContain(MODEL_KEY)
    expect(text).not.toContain(receiver.url)
    expect(text).not.toContain('127.0.0.1')
  })
})
