/**
 * One trace per task across instances (issue 28): two instances on one Redis (store and
 * coordination), the first without room for containers. A task submitted on the first is
 * taken from the shared queue and run by the second, which continues the trace stored on
 * the task record: the submit's span (first instance) and the run's, claim's, runner's,
 * model call's (the second instance's gateway) and tool call's spans are one trace.
 */
import { systemClock } from '@berth/core'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { startOtlpReceiver, startRedis, type LocalRedis, type OtlpReceiver } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startCluster, type Cluster } from './cluster.helpers.js'
import { waitForTask } from './helpers.js'
import { byName, registerTracing, taskTraceId } from './tracing.helpers.js'

const MODEL_KEY = 'sk-ant-api03-TRACEKEY-instances-77e1'

describe('traces of a task across two instances on one Redis', () => {
  let otlp: OtlpReceiver
  let sdk: { shutdown(): Promise<void> }
  let upstream: OfflineModelServer
  let redis: LocalRedis
  let c: Cluster
  beforeAll(async () => {
    otlp = await startOtlpReceiver()
    sdk = registerTracing(otlp.tracesUrl)
    upstream = await startOfflineModel({ apiKey: MODEL_KEY })
    redis = await startRedis()
    c = await startCluster('redis', {
      redis,
      leaseMs: 1_000,
      local: { maxes: [0, 1], sandbox: 'bwrap' },
      berth: { clock: systemClock },
    })
  }, 120_000)
  afterAll(async () => {
    await c?.close()
    await redis?.stop()
    await upstream?.close()
    await sdk?.shutdown()
    await otlp?.close()
  })

  it('a task submitted on one instance and run on the other is one trace', async () => {
    const [a, b] = c.instances as [Cluster['instances'][number], Cluster['instances'][number]]
    const user = await c.user()
    const api = a.client(user.token)
    const key = await api.apiKeys.create({
      body: { name: 'prod', provider: 'anthropic', key: MODEL_KEY, base_url: upstream.url },
    })
    const profile = await api.profiles.create({
      body: { name: 'Agent', slug: 'agent', api_key_id: key.id, default_tools: ['Bash'], model: 'claude-sonnet-4-5' },
    })
    const submitted = await api.tasks.submit({
      body: {
        mode: 'batch',
        profile_id: profile.id,
        prompt: 'Look. [[berth:tool Bash {"command":"true"}]] [[berth:text Ran elsewhere.]]',
      },
    })
    const done = await waitForTask(api, submitted.task_id, { timeout: 120_000 })
    expect(done.status).toBe('completed')
    const ws = await b.berth.services.workspaces.records.get(user.id, submitted.workspace_id)
    expect(ws.instance_id, 'the second instance ran it').toBe(b.coordination.instanceId)

    const names = ['POST /v1/tasks', 'task.submit', 'task.queue', 'task.run', 'task.claim', 'task.runner']
    const tool = 'execute_tool Bash'
    const model = 'chat claude-sonnet-4-5'
    const spans = await otlp.waitFor((all) => {
      const id = taskTraceId(all, submitted.task_id)
      const got = id ? byName(all, id) : new Map()
      return [...names, tool, model].every((n) => got.has(n))
    })
    const traceId = taskTraceId(spans, submitted.task_id)!
    const t = byName(spans, traceId)
    expect(t.get('task.submit')!.attributes['berth.instance.id']).toBe(a.coordination.instanceId)
    expect(t.get('task.run')!.attributes['berth.instance.id']).toBe(b.coordination.instanceId)
    const parent = (child: string, of: string) =>
      expect(t.get(child)!.parentSpanId, `${child} under ${of}`).toBe(t.get(of)!.spanId)
    parent('task.submit', 'POST /v1/tasks')
    parent('task.run', 'task.submit')
    parent('task.claim', 'task.run')
    parent('task.runner', 'task.run')
    parent(tool, 'task.runner')
    parent(model, 'task.run')
    expect(t.get('task.run')!.attributes['berth.task.status']).toBe('completed')
    // Exactly one run of the task, on one trace.
    expect(
      spans.filter((s) => s.name === 'task.run' && s.attributes['berth.task.id'] === submitted.task_id),
    ).toHaveLength(1)
  }, 180_000)
})
