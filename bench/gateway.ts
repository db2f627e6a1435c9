/**
 * The model gateway's added latency: a streamed `POST /v1/messages` to the offline model
 * directly (TCP on 127.0.0.1, the real key) against the same request through the gateway
 * (its unix socket, a capability token; the gateway checks it, checks the model, re-serialises
 * the body, injects the key and streams the answer back while metering it). One request at
 * a time, direct and gateway alternating, both over keep-alive connections, after a warm-up.
 *
 * Measured per request, from the first byte written: response headers, the first SSE event
 * (`message_start`) and the end of the stream. Bodies of several sizes, because the gateway
 * reads and re-serialises the whole body before it forwards it, and Claude Code's requests
 * carry its system prompt and tool definitions (tens to hundreds of KB).
 *
 * Target (issue 25): under 5 ms p50 added to the first event.
 *
 * Knobs: BENCH_GATEWAY_ITERATIONS (200 per target and body size), BENCH_GATEWAY_WARMUP (30),
 * BENCH_GATEWAY_BODY_KB (`1,200`: request sizes in KB, padded in `system`).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { Agent, request, type RequestOptions } from 'node:http'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { startOfflineModel } from '@berth/stub-model'
import { startModelGateway, type GatewayGrant } from '../packages/server/src/broker/model-gateway.js'
import { runAsScript, writeResults } from './lib/results.js'
import { summarize, type Summary } from './lib/stats.js'
import { ms, table } from './lib/table.js'

/** Milliseconds the gateway may add to the first event, p50 (issue 25). */
export const TARGET_ADDED_MS = 5

const ITERATIONS = Number(process.env.BENCH_GATEWAY_ITERATIONS ?? 200)
const WARMUP = Number(process.env.BENCH_GATEWAY_WARMUP ?? 30)
const BODY_KB = (process.env.BENCH_GATEWAY_BODY_KB ?? '1,200').split(',').map(Number)
const KEY = 'sk-ant-api03-bench-real-key'
const TOKEN = 'btk_bench_capability_token'

interface Timing {
  headers: number
  firstEvent: number
  end: number
}

/** One streamed request; times in ms from the moment the body was handed to the socket. */
function timed(options: RequestOptions, body: string): Promise<Timing> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const req = request(options, (res) => {
      const headers = performance.now() - t0
      let firstEvent = NaN
      let seen = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        if (!Number.isNaN(firstEvent)) return
        seen += chunk
        if (seen.includes('\n\n')) firstEvent = performance.now() - t0
      })
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}: ${seen}`))
        else resolve({ headers, firstEvent, end: performance.now() - t0 })
      })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

interface Row {
  bodyKb: number
  direct: { headers: Summary; firstEvent: Summary; end: Summary }
  gateway: { headers: Summary; firstEvent: Summary; end: Summary }
  addedFirstEventP50: number
  addedFirstEventP90: number
  pass: boolean
}

function summaries(samples: Timing[]) {
  return {
    headers: summarize(samples.map((s) => s.headers)),
    firstEvent: summarize(samples.map((s) => s.firstEvent)),
    end: summarize(samples.map((s) => s.end)),
  }
}

export async function main(): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-bench-gateway-'))
  const stub = await startOfflineModel({ apiKey: KEY })
  const grant: GatewayGrant = {
    task_id: 'task_bench',
    owner_id: 'usr_bench',
    profile_id: 'prof_bench',
    upstream: { base_url: stub.url, api_key: KEY },
    allowed_models: ['claude-sonnet-*'],
    max_budget_usd: null,
    monthly_limits: [],
  }
  const gateway = await startModelGateway({
    socketPath: join(dir, 'model.sock'),
    authorize: async (token) => (token === TOKEN ? grant : null),
  })
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  const stubUrl = new URL(stub.url)
  const headers = { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }
  const direct: RequestOptions = {
    agent,
    host: stubUrl.hostname,
    port: stubUrl.port,
    path: '/v1/messages?beta=true',
    method: 'POST',
    headers: { ...headers, 'x-api-key': KEY },
  }
  const through: RequestOptions = {
    agent,
    socketPath: gateway.socketPath,
    path: '/v1/messages?beta=true',
    method: 'POST',
    headers: { ...headers, 'x-api-key': TOKEN },
  }
  const load0 = loadavg()
  console.log(
    `\nModel gateway: streamed POST /v1/messages to the offline model, direct vs through the gateway, ${ITERATIONS} requests each per body size, one at a time (load average ${load0.map((l) => l.toFixed(2)).join(' ')}, ${cpus().length} cores)`,
  )
  const rows: Row[] = []
  try {
    for (const kb of BODY_KB) {
      const body = JSON.stringify({
        model: 'claude-sonnet-4-5',
        max_tokens: 1024,
        stream: true,
        system: 'x'.repeat(Math.max(0, kb * 1024 - 200)),
        messages: [{ role: 'user', content: '[[berth:text Hello from the bench, a few words to stream back.]]' }],
      })
      for (let i = 0; i < WARMUP; i++) {
        await timed(direct, body)
        await timed(through, body)
      }
      const d: Timing[] = []
      const g: Timing[] = []
      for (let i = 0; i < ITERATIONS; i++) {
        // Alternate which goes first, so neither always follows the other's garbage.
        if (i % 2) {
          d.push(await timed(direct, body))
          g.push(await timed(through, body))
        } else {
          g.push(await timed(through, body))
          d.push(await timed(direct, body))
        }
      }
      const ds = summaries(d)
      const gs = summaries(g)
      const added = gs.firstEvent.p50 - ds.firstEvent.p50
      rows.push({
        bodyKb: kb,
        direct: ds,
        gateway: gs,
        addedFirstEventP50: added,
        addedFirstEventP90: gs.firstEvent.p90 - ds.firstEvent.p90,
        pass: added < TARGET_ADDED_MS,
      })
    }
  } finally {
    agent.destroy()
    await gateway.close()
    await stub.close()
    rmSync(dir, { recursive: true, force: true })
  }
  const metered = gateway.usage('task_bench')
  console.log(
    `\n${table(
      [
        'body KB',
        'direct first event p50',
        'p90',
        'gateway first event p50',
        'p90',
        'added p50',
        'added p90',
        'gateway headers p50',
        'gateway end p50',
        `added p50 < ${TARGET_ADDED_MS} ms`,
      ],
      rows.map((r) => [
        String(r.bodyKb),
        ms(r.direct.firstEvent.p50),
        ms(r.direct.firstEvent.p90),
        ms(r.gateway.firstEvent.p50),
        ms(r.gateway.firstEvent.p90),
        ms(r.addedFirstEventP50),
        ms(r.addedFirstEventP90),
        ms(r.gateway.headers.p50),
        ms(r.gateway.end.p50),
        r.pass ? 'PASS' : 'BELOW TARGET',
      ]),
    )}`,
  )
  console.log(
    `\nMetered by the gateway: ${metered?.requests ?? 0} answers, $${(metered?.cost_usd ?? 0).toFixed(4)}; load average at the end ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  )
  writeResults('gateway', {
    cpus: cpus().length,
    loadavg: { start: load0, end: loadavg() },
    config: { iterations: ITERATIONS, warmup: WARMUP, bodyKb: BODY_KB },
    targetAddedMs: TARGET_ADDED_MS,
    results: rows,
  })
  return rows
}

runAsScript(import.meta.url, main)
