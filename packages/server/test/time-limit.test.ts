/**
 * A task's wall-time limit (issue 29): a task past its `max_duration_s` (or the operator's
 * default) is interrupted and fails TIME_LIMIT_EXCEEDED with its partial result, on a real
 * engine with the real runner; a submit asking more than the operator's cap is refused
 * with 400 and stores nothing; a task within its limit completes as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { failure } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { agentUser, taskServer } from './tasks.helpers.js'

const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]]`

describe('wall-time limits on docker', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer('docker', { min: 0, max: 4, berth: { taskTimeLimit: { defaultS: 3, maxS: 60 } } })
  }, 120_000)
  afterAll(async () => {
    await t?.s.close()
    if (t) await sweep(t.runtime, t.pool)
  })

  it('a task past the default limit fails TIME_LIMIT_EXCEEDED with its partial result', async () => {
    const a = await agentUser(t.s)
    const done = await a.run({ prompt: `Work long. ${bash('echo started; sleep 120')} [[berth:text Finished late.]]` })
    expect(done.status).toBe('failed')
    expect(done.error?.code).toBe('TIME_LIMIT_EXCEEDED')
    expect(done.error?.error).toContain('3 s')
    // The partial run is kept: the Bash call was made, and the late answer never came.
    expect(done.result).not.toBeNull()
    expect(done.result?.tool_calls.map((c) => c.name)).toContain('Bash')
    expect(done.result?.text ?? '').not.toContain('Finished late.')
  }, 120_000)

  it('a limit asked above the cap is refused and stores nothing; one within it lets the task finish', async () => {
    const a = await agentUser(t.s)
    const before = (await a.api.tasks.list({ query: {} })).total
    const workspaces = (await a.api.workspaces.list({ query: {} })).total
    const refused = await failure(a.submit({ prompt: 'Too long a leash.', max_duration_s: 61 }))
    expect(refused.status).toBe(400)
    expect(refused.code).toBe('VALIDATION_FAILED')
    expect(JSON.stringify(refused.details)).toContain('max_duration_s')
    expect((await a.api.tasks.list({ query: {} })).total).toBe(before)
    expect((await a.api.workspaces.list({ query: {} })).total).toBe(workspaces)
    // Asked for more than the default (3 s), within the cap: the 5 s sleep finishes.
    const done = await a.run({
      prompt: `Work a bit. ${bash('echo started; sleep 5')} [[berth:text Finished.]]`,
      max_duration_s: 30,
    })
    expect(done.error).toBeNull()
    expect(done.status).toBe('completed')
    expect(done.result?.text).toContain('Finished.')
  }, 120_000)
})
