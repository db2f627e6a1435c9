/**
 * The standalone server's metrics settings, as an operator runs it: on by default at
 * `GET /metrics` behind the operator token, also unauthenticated on `BERTH_METRICS_LISTEN`'s
 * separate listener, and a 404 with `BERTH_METRICS=off`. The runtime is `local` (no
 * container is started here); the store is the default (SQLite in the data dir), counted
 * for errors through the metrics' store wrapper.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { SERVER } from './multi-instance.helpers.js'
import { REPO_ROOT, bareEnv, freePort, startStandalone } from './standalone.helpers.js'

const ADMIN = 'operator-token-metrics-standalone'
const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

async function start(settings: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-metrics-standalone-'))
  dirs.push(dataDir)
  const port = await freePort()
  return startStandalone({
    command: SERVER,
    cwd: join(REPO_ROOT, 'examples/standalone-server'),
    port,
    env: bareEnv({
      PORT: String(port),
      BERTH_ADMIN_TOKEN: ADMIN,
      BERTH_DATA_DIR: dataDir,
      BERTH_RUNTIME: 'local',
      ...settings,
    }),
  })
}

it('serves metrics to the operator token, and unauthenticated on BERTH_METRICS_LISTEN only', async () => {
  const scrapePort = await freePort()
  const s = await start({ BERTH_METRICS_LISTEN: `127.0.0.1:${scrapePort}` })
  try {
    expect(s.output()).toContain(
      `Metrics: GET /metrics for the operator token and unauthenticated at http://127.0.0.1:${scrapePort}/metrics`,
    )
    expect((await fetch(`${s.url}/metrics`)).status).toBe(401)
    const main = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })
    expect(main.status).toBe(200)
    expect(await main.text()).toContain('berth_http_requests_total{route="metrics",method="GET",status="401"} 1')
    const separate = await fetch(`http://127.0.0.1:${scrapePort}/metrics`)
    expect(separate.status).toBe(200)
    const text = await separate.text()
    expect(text).toContain('# TYPE berth_tasks_ended_total counter')
    expect(text).toContain('# TYPE process_resident_memory_bytes gauge')
    expect(text).not.toContain(ADMIN)
    expect((await fetch(`http://127.0.0.1:${scrapePort}/v1/profiles`)).status).toBe(404)
  } finally {
    await s.stop()
  }
})

it('BERTH_METRICS=off: GET /metrics is a 404 for the operator too', async () => {
  const s = await start({ BERTH_METRICS: 'off' })
  try {
    expect(s.output()).toContain('Metrics: off (BERTH_METRICS=off)')
    expect((await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).status).toBe(404)
  } finally {
    await s.stop()
  }
})
