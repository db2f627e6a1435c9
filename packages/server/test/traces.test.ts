/**
 * One trace per task (issue 28): with an OpenTelemetry SDK registered in this process and
 * exporting to a local OTLP receiver, a task that calls the model through the gateway and
 * runs a Bash tool is one trace whose spans cover the submit request, the queue, the claim,
 * the runner, the model call and the tool call, each under the right parent; the runner
 * gets the context as TRACEPARENT; the request log carries the trace id; no span carries
 * the prompt, a tool's output or the model key, and the task's view has no trace field.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger, systemClock } from '@berth/core'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { startOtlpReceiver, type OtlpReceiver } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { byName, registerTracing, taskTraceId } from './tracing.helpers.js'

const MODEL_KEY = 'sk-ant-api03-TRACEKEY-4f8d2c6b9a1e'
const PROMPT_MARK = 'prompt-mark-Qv83Lz'

describe('traces of a task on one instance', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-traces-'))
  const pool = uniquePoolName('traces')
  const runtime = localRuntime({ baseDir: join(dir, 'local'), logger: silentLogger, sandbox: 'bwrap' })
  let otlp: OtlpReceiver
  let sdk: { shutdown(): Promise<void> }
  let upstream: OfflineModelServer
  let s: TestServer
  beforeAll(async () => {
    otlp = await startOtlpReceiver()
    sdk = registerTracing(otlp.tracesUrl)
    upstream = await startOfflineModel({ apiKey: MODEL_KEY })
    s = await startServer({
      dataDir: join(dir, 'data'),
      clock: systemClock,
      runtime,
      pool: { image: 'local', min: 0, max: 2, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
      // The fake provider listens on loopback.
      allowPrivateWebhooks: true,
    })
    await s.berth.ready
  }, 120_000)
  afterAll(async () => {
    await s?.close()
    await upstream?.close()
    await sweep(runtime, pool)
    await sdk?.shutdown()
    await otlp?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('submit, queue, claim, runner, model and tool calls are one trace, the context reaches the runner', async () => {
    const { token } = await s.user()
    const api = clientFor(s, token)
    const key = await api.apiKeys.create({
      body: { name: 'prod', provider: 'anthropic', key: MODEL_KEY, base_url: upstream.url },
    })
    const profile = await api.profiles.create({
      body: { name: 'Agent', slug: 'agent', api_key_id: key.id, default_tools: ['Bash'], model: 'claude-sonnet-4-5' },
    })
    const command = 'echo "TP=$TRACEPARENT"'
    const submitted = await api.tasks.submit({
      body: {
        mode: 'batch',
        profile_id: profile.id,
        prompt: `${PROMPT_MARK} [[berth:tool Bash {"command":${JSON.stringify(command)}}]] [[berth:text Traced.]]`,
      },
    })
    const done = await waitForTask(api, submitted.task_id, { timeout: 120_000 })
    expect(done.error).toBeNull()
    expect(done.status).toBe('completed')
    // The trace context is internal: not in the task's view.
    expect(Object.keys(done)).not.toContain('trace')

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
    const parent = (child: string, of: string) =>
      expect(t.get(child)!.parentSpanId, `${child} under ${of}`).toBe(t.get(of)!.spanId)
    expect(t.get('POST /v1/tasks')!.parentSpanId).toBe('')
    expect(t.get('POST /v1/tasks')!.attributes['http.response.status_code']).toBe(202)
    parent('task.submit', 'POST /v1/tasks')
    parent('task.queue', 'task.submit')
    parent('task.run', 'task.submit')
    parent('task.claim', 'task.run')
    parent('task.runner', 'task.run')
    parent(tool, 'task.runner')
    // The gateway's span: a child of the run (the grant carries the run's context), with usage.
    parent(model, 'task.run')
    const call = t.get(model)!
    expect(call.attributes['gen_ai.request.model']).toBe('claude-sonnet-4-5')
    expect(call.attributes['gen_ai.usage.output_tokens']).toBeGreaterThan(0)
    expect(call.attributes['http.response.status_code']).toBe(200)
    expect(t.get(tool)!.attributes['gen_ai.tool.name']).toBe('Bash')
    expect(t.get(tool)!.endTimeUnixNano).toBeGreaterThanOrEqual(t.get(tool)!.startTimeUnixNano)
    const run = t.get('task.run')!
    expect(run.attributes['berth.task.status']).toBe('completed')
    expect(run.attributes['berth.task.id']).toBe(submitted.task_id)
    // Every model call of the task is in the trace.
    const calls = spans.filter((x) => x.traceId === traceId && x.name === model)
    expect(calls.length).toBe(upstream.requests.length)

    // The runner's tools saw the runner span's context.
    const events = (await api.tasks.events({ params: { id: submitted.task_id }, query: { limit: 100 } })).events
    const printed = JSON.stringify(events.filter((e) => e.type === 'tool_result'))
    expect(printed).toContain(`TP=00-${traceId}-${t.get('task.runner')!.spanId}-01`)
    // The submit's log line names the trace.
    const line = s.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'request' && l.route === 'tasks.submit')
    expect(line?.trace_id).toBe(traceId)
    // No span holds the prompt, the tool's input or output, or the key.
    const exported = JSON.stringify(spans, (_k, v) => (typeof v === 'bigint' ? String(v) : v))
    for (const secret of [PROMPT_MARK, MODEL_KEY, 'TP=', 'echo']) expect(exported).not.toContain(secret)
  }, 180_000)

  it('a task that fails ends its run span with the status and the error code', async () => {
    const { token } = await s.user('Failing user')
    const api = clientFor(s, token)
    const key = await api.apiKeys.create({
      body: { name: 'prod', provider: 'anthropic', key: MODEL_KEY, base_url: upstream.url },
    })
    const profile = await api.profiles.create({
      body: { name: 'Agent', slug: 'agent', api_key_id: key.id, model: 'claude-sonnet-4-5' },
    })
    const submitted = await api.tasks.submit({
      body: { mode: 'batch', profile_id: profile.id, prompt: 'Loop. [[berth:turns 6]]', max_turns: 2 },
    })
    const done = await waitForTask(api, submitted.task_id, { timeout: 120_000 })
    expect(done.error?.code).toBe('TURN_LIMIT_EXCEEDED')
    const spans = await otlp.waitFor((all) =>
      all.some((x) => x.name === 'task.run' && x.attributes['berth.task.id'] === submitted.task_id),
    )
    const run = spans.find((x) => x.name === 'task.run' && x.attributes['berth.task.id'] === submitted.task_id)!
    expect(run.attributes['berth.task.status']).toBe('failed')
    expect(run.attributes['berth.task.error_code']).toBe('TURN_LIMIT_EXCEEDED')
    expect(run.status.code).toBe(2)
    expect(run.traceId).toBe(taskTraceId(spans, submitted.task_id))
  }, 180_000)

  it('a request with a traceparent header continues the caller’s trace', async () => {
    const callerTrace = '0af7651916cd43dd8448eb211c80319c'
    const res = await s.request('/health', { headers: { traceparent: `00-${callerTrace}-b7ad6b7169203331-01` } })
    expect(res.status).toBe(200)
    const spans = await otlp.waitFor((all) => all.some((x) => x.traceId === callerTrace))
    const span = spans.find((x) => x.traceId === callerTrace)!
    expect(span.name).toBe('GET /health')
    expect(span.parentSpanId).toBe('b7ad6b7169203331')
  })
})
