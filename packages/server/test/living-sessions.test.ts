/**
 * A session's living agent (issue 42) on Docker and on local (bwrap): steering a follow-up
 * (interrupt, cancel, approvals, messages, time limits), a follow-up whose settings
 * changed, and deleting the workspace; see living-sessions.helpers.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer } from './helpers.js'
import {
  approvalsInLivingAgent,
  cancelEndsAgent,
  changedSettingsNewAgent,
  deleteTakesEverything,
  interruptKeepsAgent,
  messageReachesAgent,
  timeLimitInLivingAgent,
  type LivingCase,
} from './living-sessions.helpers.js'
import { onEngine, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser, taskServer } from './tasks.helpers.js'

const CASE_MS = 400_000

function livingCases(setup: () => LivingCase): void {
  it(
    'an interrupt of a follow-up ends it; the agent and its server live on',
    () => interruptKeepsAgent(setup()),
    CASE_MS,
  )
  it('a cancel of a follow-up ends the agent; the next resumes in a new one', () => cancelEndsAgent(setup()), CASE_MS)
  it('approvals in a follow-up of a living agent', () => approvalsInLivingAgent(setup()), CASE_MS)
  it('a message during a follow-up reaches the living agent', () => messageReachesAgent(setup()), CASE_MS)
  it(
    'max_duration_s ends a follow-up TIME_LIMIT_EXCEEDED; the session goes on',
    () => timeLimitInLivingAgent(setup()),
    CASE_MS,
  )
  it(
    'a follow-up whose settings changed runs in a new agent; the old one ended',
    () => changedSettingsNewAgent(setup()),
    CASE_MS,
  )
  it(
    'deleting the workspace takes the agent and its server, nothing logged',
    () => deleteTakesEverything(setup()),
    CASE_MS,
  )
}

describe('living sessions on docker', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer('docker', { min: 0 })
  })
  afterAll(async () => {
    await t?.s.close()
    if (t) expect(await sweep(t.runtime, t.pool)).toBe(0)
  })
  livingCases(() => t)
})

describe('living sessions on local (bwrap sandbox)', () => {
  let t: LivingCase
  let close: () => Promise<void>
  beforeAll(async () => {
    const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-living-'))
    const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
    const pool = uniquePoolName('local-living')
    const s = await startServer({
      runtime,
      pool: { image: 'local', min: 0, max: 4, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
    })
    await s.berth.ready
    t = { s, runtime, pool, ...(await agentUser(s, { waitMs: 90_000 })) }
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
  livingCases(() => t)
})
