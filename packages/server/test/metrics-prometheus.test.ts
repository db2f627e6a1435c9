/**
 * Metrics seen by a real Prometheus (Debian's package): a Berth server on loopback with
 * metrics on runs one agent task on the local runtime with the offline model; Prometheus
 * scrapes `GET /metrics` with the operator token and its HTTP API answers the task counter
 * and the first-token histogram for that task. `promtool check metrics` passes on the
 * exposition, `promtool check rules` on the alerts in docs/OPERATIONS.md, and no label value
 * carries an id, the caller's key, the prompt or a secret.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { promtool, startPrometheus, type LocalPrometheus } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, startServer, type TestServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser } from './tasks.helpers.js'

const SECRET_VALUE = 'metrics-secret-value-5f1c9a'
const PROMPT_WORD = 'zanzibar-metrics-probe'

/** Every label value of an exposition. */
const labelValues = (text: string): string[] =>
  text
    .split('\n')
    .filter((l) => l && !l.startsWith('#'))
    .flatMap((l) => [...l.matchAll(/[a-zA-Z_]\w*="((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!))

describe('metrics scraped by Prometheus', () => {
  let s: TestServer
  let prom: LocalPrometheus
  let agent: Awaited<ReturnType<typeof agentUser>>
  const baseDir = mkdtempSync(join(tmpdir(), 'berth-metrics-'))
  const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
  const pool = uniquePoolName('metrics')

  beforeAll(async () => {
    s = await startServer({
      runtime,
      pool: { image: 'local', min: 1, max: 2, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
      metrics: true,
    })
    await s.berth.ready
    agent = await agentUser(s, { waitMs: 90_000 })
    await agent.api.secrets.create({
      body: { name: 'PROBE_SECRET', value: SECRET_VALUE, profile_ids: [agent.profileId] },
    })
    prom = await startPrometheus({ targets: [new URL(s.url).host], bearerToken: ADMIN_TOKEN })
  })
  afterAll(async () => {
    await prom?.stop()
    await s?.close()
    const left = await onEngine(runtime, pool)
    await Promise.all(left.map((c) => runtime.remove(c.id)))
    rmSync(baseDir, { recursive: true, force: true })
  })

  it('after one task, its HTTP API answers the task counters and the first-token histogram for it', async () => {
    await prom.waitFor('up{job="berth"}', (r) => r[0]?.value[1] === '1')
    const task = await agent.run({ prompt: `Say hello. ${PROMPT_WORD} [[berth:text Hello from the metrics test.]]` })
    expect(task.status).toBe('completed')
    const ended = await prom.waitFor('berth_tasks_ended_total{job="berth"}', (r) => r.length > 0)
    expect(ended.map((r) => [r.metric, r.value[1]])).toEqual([
      [expect.objectContaining({ mode: 'batch', status: 'completed', code: 'none' }), '1'],
    ])
    const [started] = await prom.query('berth_tasks_started_total{job="berth",mode="batch"}')
    expect(started?.value[1]).toBe('1')
    const [firstToken] = await prom.waitFor('berth_task_first_token_seconds_count{job="berth",mode="batch"}', (r) =>
      Boolean(r[0]),
    )
    expect(firstToken?.value[1]).toBe('1')
    const [runnerStarts] = await prom.query('berth_runner_start_seconds_count{job="berth"}')
    expect(Number(runnerStarts?.value[1])).toBe(1)
    const [claims] = await prom.query('berth_pool_claim_seconds_count{job="berth"}')
    expect(Number(claims?.value[1])).toBeGreaterThanOrEqual(1)
    const submits = await prom.query('berth_http_requests_total{job="berth",route="tasks.submit",status="202"}')
    expect(submits.map((r) => r.value[1])).toEqual(['1'])
    const [max] = await prom.query('berth_pool_containers{job="berth",state="max"}')
    expect(max?.value[1]).toBe('2')
  })

  it('the exposition passes promtool check metrics, and its labels carry no id, key, prompt or secret', async () => {
    const res = await s.request('/metrics', { token: ADMIN_TOKEN })
    expect(res.status).toBe(200)
    const text = await res.text()
    await promtool(['check', 'metrics'], text)
    expect(text).toContain('berth_tasks_ended_total{mode="batch",status="completed",code="none"} 1')
    for (const value of [agent.token, ADMIN_TOKEN, SECRET_VALUE, PROMPT_WORD, agent.id, agent.profileId])
      expect(text).not.toContain(value)
    const values = labelValues(text)
    expect(values).toContain('tasks.submit')
    const ids = /^(task|ws|prof|usr|ck|key|sec|ctr|sess|int|dlv|ntf|env|apr|run|pb)_[0-9a-z]/
    expect(values.filter((v) => ids.test(v) || v.includes('/'))).toEqual([])
  })

  it('GET /metrics without the operator token is 401 on the main listener', async () => {
    expect((await s.request('/metrics')).status).toBe(401)
    expect((await s.request('/metrics', { token: agent.token })).status).toBe(403)
  })

  it('the example alerts of docs/OPERATIONS.md pass promtool check rules and evaluate against these metrics', async () => {
    const doc = readFileSync(new URL('../../../docs/OPERATIONS.md', import.meta.url), 'utf8')
    const rules = /```yaml\n(groups:[\s\S]*?)```/.exec(doc)?.[1]
    expect(rules).toBeDefined()
    const dir = mkdtempSync(join(tmpdir(), 'berth-rules-'))
    try {
      const file = join(dir, 'berth.rules.yml')
      writeFileSync(file, rules!)
      expect(await promtool(['check', 'rules', file])).toMatch(/SUCCESS: 4 rules found/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    // Each expression names metrics Berth exports: it evaluates without an error.
    for (const m of rules!.matchAll(/expr: (?:\|\n((?: {10}.*\n)+)|(.*)\n)/g)) await prom.query((m[1] ?? m[2])!.trim())
  })

  it('docs/OPERATIONS.md lists every berth_* metric exported, and the Grafana dashboard queries only those', async () => {
    const text = await (await s.request('/metrics', { token: ADMIN_TOKEN })).text()
    const exported = new Set([...text.matchAll(/^# TYPE (berth_\w+) /gm)].map((m) => m[1]!))
    const doc = readFileSync(new URL('../../../docs/OPERATIONS.md', import.meta.url), 'utf8')
    const documented = new Set([...doc.matchAll(/^\| `(berth_\w+)` \|/gm)].map((m) => m[1]!))
    expect([...documented].sort()).toEqual([...exported].sort())
    const dashboard = JSON.parse(readFileSync(new URL('../../../docs/grafana/berth.json', import.meta.url), 'utf8'))
    const exprs: string[] = dashboard.panels.flatMap((p: { targets: { expr: string }[] }) =>
      p.targets.map((t) => t.expr),
    )
    expect(exprs.length).toBeGreaterThan(20)
    for (const expr of exprs) {
      for (const [name] of expr.matchAll(/\bberth_\w+/g))
        expect(exported.has(name.replace(/_(bucket|count|sum)$/, ''))).toBe(true)
      // Valid PromQL that Prometheus evaluates, the dashboard's instance variable set to all.
      await prom.query(expr.replaceAll('$instance', '.*'))
    }
  })
})
