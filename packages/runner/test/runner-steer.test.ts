import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { RunnerEvent } from '@berth/contract'
import { describe, expect, it } from 'vitest'
import { control, makeInput, runRunner } from './helpers.js'

type Request = Extract<RunnerEvent, { type: 'permission_request' }>
type Decision = Extract<RunnerEvent, { type: 'permission_decision' }>

const ofType = <T extends RunnerEvent['type']>(events: RunnerEvent[], type: T) =>
  events.filter((e): e is Extract<RunnerEvent, { type: T }> => e.type === type)

/** Process ids whose command line contains `needle` (none once the tool's process is gone). */
function processesWith(needle: string): string[] {
  try {
    return execFileSync('pgrep', ['-f', needle], { encoding: 'utf8' }).split('\n').filter(Boolean)
  } catch {
    return []
  }
}

// The bundled runner with the real SDK against the offline model, steered through control
// lines on its stdin as the server writes them.
describe('berth-runner steering (stub provider)', () => {
  it('asks before a matching tool: a denial reaches the agent, an allowed call runs', async () => {
    const marker = 'marker'
    const touch = `touch ${marker}`
    const input = makeInput(
      `Make the marker [[berth:tool Bash {"command":"${touch}"}]] [[berth:tool Bash {"command":"${touch}"}]] [[berth:text Marker done.]]`,
      { require_approval: ['Bash'] },
    )
    const path = join(input.cwd, marker)
    let sawFileAfterDenial: boolean | null = null
    let requestsSeen = 0
    const run = await runRunner(input, {
      keepOpen: true,
      onEvent: (e, child) => {
        if (e.type === 'permission_decision' && e.decision === 'deny') sawFileAfterDenial = existsSync(path)
        if (e.type !== 'permission_request') return
        const first = requestsSeen++ === 0
        control(
          child,
          first
            ? { type: 'decision', request_id: e.request_id, decision: 'deny', message: 'not on a Friday' }
            : { type: 'decision', request_id: e.request_id, decision: 'allow' },
        )
      },
    })
    expect(run.exitCode, run.stderr).toBe(0)
    const requests = ofType(run.events, 'permission_request')
    expect(requests).toHaveLength(2)
    expect(requests[0]).toMatchObject({
      tool: 'Bash',
      input: { command: touch },
      request_id: expect.stringMatching(/^apr_/),
    })
    const decisions = ofType(run.events, 'permission_decision')
    expect(decisions).toEqual([
      {
        type: 'permission_decision',
        request_id: requests[0]!.request_id,
        decision: 'deny',
        message: 'not on a Friday',
        by: 'caller',
      },
      {
        type: 'permission_decision',
        request_id: requests[1]!.request_id,
        decision: 'allow',
        message: null,
        by: 'caller',
      },
    ])
    expect(sawFileAfterDenial).toBe(false)
    expect(existsSync(path)).toBe(true)
    // The agent's next turn saw why: the denial is the first call's result.
    const results = ofType(run.events, 'tool_result')
    expect(results[0]).toMatchObject({ is_error: true, output: expect.stringContaining('not on a Friday') })
    expect(results[1]).toMatchObject({ is_error: false })
    expect(run.result).toMatchObject({ outcome: 'success' })
  })
})
