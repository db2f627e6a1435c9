/**
 * Session and fork costs on the `local` runtime (bubblewrap), issue 41: each task's tokens
 * and cost are its own model calls, and the caller's usage sums them, through the model
 * gateway and on the `stub` provider (see usage-sessions.helpers.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { afterAll, beforeAll, describe, it } from 'vitest'
import { startServer, type TestServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { USAGE_MODEL_KEY, sessionAndForkCosts } from './usage-sessions.helpers.js'

describe('session and fork costs on local (bwrap)', () => {
  let s: TestServer
  let upstream: OfflineModelServer
  let baseDir: string
  let close: () => Promise<void>
  beforeAll(async () => {
    upstream = await startOfflineModel({ apiKey: USAGE_MODEL_KEY })
    baseDir = mkdtempSync(join(tmpdir(), 'berth-local-usage-'))
    const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
    const pool = uniquePoolName('local-usage')
    s = await startServer({
      runtime,
      pool: { image: 'local', min: 0, max: 4, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
      // The credential's base URL is the offline model on this machine.
      allowPrivateWebhooks: true,
    })
    await s.berth.ready
    close = async () => {
      await s.close()
      await Promise.all((await onEngine(runtime, pool)).map((c) => runtime.remove(c.id)))
      for (const v of await runtime.listVolumes({ labels: { 'berth.pool': pool } })) await runtime.removeVolume(v.name)
    }
  })
  afterAll(async () => {
    await close?.()
    await upstream?.close()
    rmSync(baseDir, { recursive: true, force: true })
  })

  it('through the model gateway: each task costs the calls the model answered it, and usage sums the tasks', async () => {
    await sessionAndForkCosts(s, { gateway: upstream })
  }, 600_000)

  it('on the stub provider (metered by the runner): the same', async () => {
    await sessionAndForkCosts(s, 'stub')
  }, 600_000)
})
