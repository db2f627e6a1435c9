/**
 * Idle sessions yield to waiting work (issue 42) on the `local` runtime (bubblewrap), with
 * the real runner and the offline model: see idle-yield.helpers.ts for the scenarios.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer } from './helpers.js'
import {
  idleSessionsYieldSlots,
  LONG_IDLE_MS,
  TEN_SESSIONS_BYTES,
  tenIdleSessionsYieldMemory,
  type YieldServer,
} from './idle-yield.helpers.js'
import { sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

describe('idle sessions yield on local (bwrap)', () => {
  const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-yield-'))
  const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
  const pool = uniquePoolName('local-yield')
  let s: YieldServer
  beforeAll(async () => {
    s = await startServer({
      runtime,
      pool: { image: 'local', min: 0, max: 12, name: pool, memoryBudgetBytes: TEN_SESSIONS_BYTES },
      runner: { bundleDir: RUNNER_BUNDLE },
      concurrency: 5,
      sessionIdleMs: LONG_IDLE_MS,
      metrics: true,
    })
    await s.berth.ready
  })
  afterAll(async () => {
    await s?.close()
    expect(await sweep(runtime, pool)).toBe(0)
    rmSync(baseDir, { recursive: true, force: true })
  })

  it('ten idle sessions of one caller hold the memory budget: another caller’s task starts, the longest idle yields and resumes later', async () => {
    await tenIdleSessionsYieldMemory(s, 90_000)
  }, 600_000)

  it('five idle sessions hold the profile’s slots: a sixth submit is admitted; with five running, Retry-After says when one ends', async () => {
    await idleSessionsYieldSlots(s, 90_000)
  }, 600_000)
})
