/**
 * Idle sessions yield to waiting work (issue 42) on Docker and Podman, with the real runner
 * and the offline model: see idle-yield.helpers.ts for the scenarios.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer } from './helpers.js'
import {
  idleSessionsYieldSlots,
  LONG_IDLE_MS,
  TEN_SESSIONS_BYTES,
  tenIdleSessionsYieldMemory,
  type YieldServer,
} from './idle-yield.helpers.js'
import { ENGINES, engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

describe.each(ENGINES)('idle sessions yield on %s', (engine) => {
  const { info, runtime } = engineRuntime(engine)
  const pool = uniquePoolName(`yield-${engine}`)
  let s: YieldServer
  beforeAll(async () => {
    s = await startServer({
      runtime,
      pool: {
        image: info.image,
        min: 0,
        max: 12,
        name: pool,
        spec: { network: 'none' },
        memoryBudgetBytes: TEN_SESSIONS_BYTES,
      },
      runner: { bundleDir: RUNNER_BUNDLE },
      concurrency: 5,
      sessionIdleMs: LONG_IDLE_MS,
      metrics: true,
    })
    await s.berth.ready
  }, 120_000)
  afterAll(async () => {
    await s?.close()
    expect(await sweep(runtime, pool)).toBe(0)
  })

  it('ten idle sessions of one caller hold the memory budget: another caller’s task starts, the longest idle yields and resumes later', async () => {
    await tenIdleSessionsYieldMemory(s, 120_000)
  }, 600_000)

  it('five idle sessions hold the profile’s slots: a sixth submit is admitted; with five running, Retry-After says when one ends', async () => {
    await idleSessionsYieldSlots(s, 120_000)
  }, 600_000)
})
