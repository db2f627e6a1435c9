/**
 * The standalone server's OpenTelemetry wiring (issue 28): started with
 * `OTEL_EXPORTER_OTLP_ENDPOINT` (and the JSON protocol, which the test kit's receiver
 * reads), it starts the Node SDK before anything else, names the service `berth`, and
 * flushes its spans when it shuts down: the request spans arrive by the time it exited,
 * well before the SDK's batch delay would have sent them.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { startOtlpReceiver, type OtlpReceiver } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { REPO_ROOT, bareEnv, freePort, startStandalone, type Standalone } from './standalone.helpers.js'

const SERVER = [
  process.execPath,
  '--import',
  pathToFileURL(join(REPO_ROOT, 'examples/standalone-server/node_modules/tsx/dist/loader.mjs')).href,
  join(REPO_ROOT, 'examples/standalone-server/src/main.ts'),
]
const ADMIN = 'operator-token-standalone-traces'

describe('the standalone server exports traces over OTLP when an endpoint is set', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-standalone-traces-'))
  let otlp: OtlpReceiver
  let server: Standalone | undefined
  let port: number
  beforeAll(async () => {
    otlp = await startOtlpReceiver()
    port = await freePort()
    server = await startStandalone({
      command: SERVER,
      cwd: dir,
      port,
      env: bareEnv({
        PORT: String(port),
        BERTH_DATA_DIR: join(dir, 'data'),
        BERTH_ADMIN_TOKEN: ADMIN,
        BERTH_RUNTIME: 'local',
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      }),
    })
  }, 120_000)
  afterAll(async () => {
    await server?.stop()
    await otlp?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('sends the request spans of service berth, flushed on shutdown', async () => {
    expect(server!.output()).toContain(`Traces: OpenTelemetry OTLP to 127.0.0.1:${new URL(otlp.url).port} (http/json)`)
    const res = await fetch(`http://127.0.0.1:${port}/admin/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Traced', role: 'user' }),
    })
    expect(res.status).toBe(201)
    expect(await server!.stop()).toBe(0)
    server = undefined
    // Exited: whatever it sent is here, no waiting.
    const span = otlp.spans.find((s) => s.name === 'POST /admin/users')
    expect(span, JSON.stringify(otlp.spans.map((s) => s.name))).toBeDefined()
    expect(span!.resource['service.name']).toBe('berth')
    expect(span!.attributes['http.response.status_code']).toBe(201)
    expect(span!.kind).toBe(2)
  }, 60_000)
})
