/**
 * Steering a working agent (issue 26) end to end on every runtime: a real server, the real
 * runner bundle and the Claude Agent SDK against the offline model. Approvals over HTTP
 * and the WebSocket, a request left alone, an interrupt mid-tool, a message mid-task, and
 * structured output.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger, type PooledContainer } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { startServer, type TestServer } from './helpers.js'
import { ENGINES, onEngine, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import {
  cancelWhileWaitingFlow,
  httpDecide,
  interruptFlow,
  markerFlow,
  messageFlow,
  socketMarkerFlow,
  structuredFlow,
  timeoutFlow,
} from './steering.helpers.js'
import { agentUser, taskServer } from './tasks.helpers.js'

type Agent = Awaited<ReturnType<typeof agentUser>>

/** The same cases on a server whose runtime the caller set up. */
function steeringCases(setup: () => { s: TestServer; a: Agent; other: Agent }) {
  it('approvals: the first touch denied (no file, the agent told why), the second allowed; 404 across callers, 409 twice', async () => {
    const { a, other } = setup()
    await markerFlow(a, other, httpDecide(a))
  })

  it('a request left alone is denied at its timeout', async () => {
    await timeoutFlow(setup().a)
  })

  it('approvals over the WebSocket', async () => {
    const { s, a } = setup()
    await socketMarkerFlow(s, a)
  })

  it("an interrupt during sleep 30 ends the task cancelled with INTERRUPTED; the session's follow-up recalls the prompt", async () => {
    await interruptFlow(setup().a)
  })

  it('a message sent mid-task is a user_message the next turn sees; an ended task answers 409', async () => {
    await messageFlow(setup().a)
  })

  it('a task cancelled while it waits for a decision ends cancelled; a queued follow-up refuses messages and is interrupted', async () => {
    await cancelWhileWaitingFlow(setup().a)
  })

  it('output_schema: a valid structured_output, and an impossible schema fails with OUTPUT_INVALID', async () => {
    await structuredFlow(setup().a)
  })
}

describe.each(ENGINES)('steering on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let other: Agent
  beforeAll(async () => {
    t = await taskServer(engine)
    other = await agentUser(t.s)
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })
  steeringCases(() => ({ s: t.s, a: t, other }))
})

describe('steering on local (bwrap sandbox)', () => {
  let s: TestServer
  let a: Agent
  let other: Agent
  let close: () => Promise<void>
  beforeAll(async () => {
    const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-steering-'))
    const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
    const pool = uniquePoolName('local-steering')
    s = await startServer({
      runtime,
      pool: { image: 'local', min: 1, max: 4, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
    })
    await s.berth.ready
    a = await agentUser(s, { waitMs: 90_000 })
    other = await agentUser(s)
    close = async () => {
      await s.close()
      const left = await onEngine(runtime, pool)
      await Promise.all(left.map((c) => runtime.remove(c.id)))
      rmSync(baseDir, { recursive: true, force: true })
    }
  })
  afterAll(async () => {
    await close?.()
  })
  steeringCases(() => ({ s, a, other }))
})

describe('steering a warm agent on podman', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let other: Agent
  beforeAll(async () => {
    t = await taskServer('podman', { min: 2, max: 8, warmAgents: 1 })
    other = await agentUser(t.s)
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  /** Containers holding a parked agent: in use, serving no workspace. */
  const parked = () =>
    (t.s.berth.pool!.list() as PooledContainer[])
      .filter((c) => c.state === 'in_use' && c.workspace_id === null)
      .map((c) => c.id)

  it('an agent started for the same rules takes its decisions after the prompt line', async () => {
    // Cold, and it leaves an agent started with the same approval rules.
    await markerFlow(t, other, httpDecide(t))
    const [agent] = await vi.waitFor(() => {
      const p = parked()
      if (p.length !== 1) throw new Error(`parked: ${p.length}`)
      return p
    }, 60_000)
    await markerFlow(t, other, httpDecide(t))
    expect(parked()).not.toContain(agent)
  })
})
