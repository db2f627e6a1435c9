/**
 * Session and fork costs on Docker and Podman, issue 41: each task's tokens and cost are
 * its own model calls, and the caller's usage sums them, through the model gateway and on
 * the `stub` provider (see usage-sessions.helpers.ts).
 */
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ENGINES, sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'
import { USAGE_MODEL_KEY, sessionAndForkCosts } from './usage-sessions.helpers.js'

describe.each(ENGINES)('session and fork costs on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let upstream: OfflineModelServer
  beforeAll(async () => {
    upstream = await startOfflineModel({ apiKey: USAGE_MODEL_KEY })
    // The credential's base URL is the offline model on this machine.
    t = await taskServer(engine, { min: 0, berth: { allowPrivateWebhooks: true } })
  })
  afterAll(async () => {
    await t?.s.close()
    await upstream?.close()
    if (!t) return
    for (const v of await t.runtime.listVolumes({ labels: { 'berth.pool': t.pool } }))
      await t.runtime.removeVolume(v.name)
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it('through the model gateway: each task costs the calls the model answered it, and usage sums the tasks', async () => {
    await sessionAndForkCosts(t.s, { gateway: upstream })
  }, 600_000)

  it('on the stub provider (metered by the runner): the same', async () => {
    await sessionAndForkCosts(t.s, 'stub')
  }, 600_000)
})
