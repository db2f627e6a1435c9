/**
 * Steering from `berth` (the package's bin, built output, a real process) against a real
 * server running real tasks on Docker and Podman: `berth run` asking `Allow? [y/N]` on a
 * terminal (a real pseudo-terminal from util-linux `script`), deciding by flag, denying
 * when no one can answer; `berth approvals`, `send`, `deny`, `approve` and `interrupt`.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ensureEngines } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ENGINES, sweep } from '../../server/test/pool.helpers.js'
import setupRunner from '../../server/test/runner.global-setup.js'
import { taskServer } from '../../server/test/tasks.helpers.js'
import { BIN, runBin } from './cli.helpers.js'

const TOUCH = '[[berth:tool Bash {"command":"touch /workspace/marker"}]]'
// Not a bare `sleep N`: Claude Code refuses those and asks for a background task.
const SLEEP = '[[berth:tool Bash {"command":"echo start; sleep 29.9; echo slept"}]]'

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** Run `berth …` to its end with stdin a pipe (not a terminal). */
const berth = runBin

/** Between polls of the event log. */
const pause = () => new Promise((r) => setTimeout(r, 100))

const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`

/**
 * Run `berth …` on a pseudo-terminal (`script`), typing each step's text once the output
 * since the step before shows its `when`. Everything it printed (stdout and stderr share
 * the terminal) comes back.
 */
function berthOnTerminal(
  args: string[],
  env: Record<string, string>,
  steps: { when: string; type: string }[],
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const command = [process.execPath, BIN, ...args].map(quote).join(' ')
    const child = spawn('script', ['-qfec', command, '/dev/null'], {
      env: { ...process.env, ...env, NO_COLOR: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let out = ''
    let from = 0
    let step = 0
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString()
      for (; step < steps.length; step++) {
        const at = out.indexOf(steps[step]!.when, from)
        if (at < 0) break
        from = at + steps[step]!.when.length
        child.stdin.write(steps[step]!.type)
      }
    })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout: out, stderr: '' }))
  })
}

beforeAll(async () => {
  ensureEngines(['podman', 'docker'])
  await setupRunner()
})

describe.each(ENGINES)('berth CLI steering on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let env: Record<string, string>
  beforeAll(async () => {
    t = await taskServer(engine)
    env = { BERTH_URL: t.s.url, BERTH_TOKEN: t.token }
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it('berth run on a terminal shows each request and asks Allow? [y/N]: n denies it, y runs it', async () => {
    const run = await berthOnTerminal(
      [
        'run',
        '--profile',
        'agent',
        '--require-approval',
        'Bash(touch:*)',
        `Mark. ${TOUCH} ${TOUCH} [[berth:text Marked.]]`,
      ],
      env,
      [
        { when: 'Allow? [y/N]', type: 'n\r' },
        { when: 'Allow? [y/N]', type: 'y\r' },
      ],
    )
    expect(run.stdout.match(/\? Bash wants to run: \{"command":"touch \/workspace\/marker"/g)).toHaveLength(2)
    expect(run.stdout.match(/Allow\? \[y\/N\]/g)).toHaveLength(2)
    expect(run.stdout).toMatch(/denied[\s\S]*allowed/)
    expect(run.stdout).toContain('Marked.')
    expect(run.code).toBe(0)
    const { tasks } = await t.api.tasks.list({ query: { limit: 1 } })
    const events = await t.events(tasks[0]!.task_id)
    const decisions = events.filter((e) => e.type === 'permission_decision')
    expect(decisions.map((d) => d.type === 'permission_decision' && d.decision)).toEqual(['deny', 'allow'])
    const results = events.filter((e) => e.type === 'tool_result')
    expect(results.map((r) => r.type === 'tool_result' && r.is_error)).toEqual([true, false])
  })

  it('Ctrl-C at the question ends berth run with 130 and cancels the task', async () => {
    const run = await berthOnTerminal(
      ['run', '--profile', 'agent', '--require-approval', 'Bash', `Mark. ${TOUCH} [[berth:text Never.]]`],
      env,
      [{ when: 'Allow? [y/N]', type: '\x03' }],
    )
    expect(run.code).toBe(130)
    expect(run.stdout).not.toContain('Never.')
    const { tasks } = await t.api.tasks.list({ query: { limit: 1 } })
    expect(tasks[0]).toMatchObject({ status: 'cancelled', prompt: expect.stringContaining('Never.') })
  })

  it('berth sessions asks on its own prompt line: the answer typed there decides, the next line is a follow-up', async () => {
    const run = await berthOnTerminal(['sessions', '--profile', 'agent', '--require-approval', 'Bash(touch:*)'], env, [
      { when: '› ', type: `Mark it. ${TOUCH} [[berth:echo_last_result]]\r` },
      { when: 'Allow? [y/N]', type: 'n\r' },
      { when: 'completed', type: 'What did I say first? [[berth:recall]]\r' },
      { when: 'completed', type: '\x04' },
    ])
    expect(run.stdout).toMatch(/\? Bash wants to run: \{"command":"touch \/workspace\/marker"\}/)
    expect(run.stdout).toMatch(/Allow\? \[y\/N\][\s\S]*denied/)
    // The agent read the denial, and the session went on.
    expect(run.stdout).toContain('The user denied this at the terminal.')
    expect(run.stdout).toContain('The first prompt was: Mark it.')
    expect(run.code).toBe(0)
  })

  it('--approve-all and --deny-all decide without asking; a piped stdin without them denies and says why', async () => {
    const body = ['--profile', 'agent', '--require-approval', 'Bash', `Mark. ${TOUCH} [[berth:echo_last_result]]`]
    const all = await berth(['run', ...body, '--approve-all'], env)
    expect(all.stderr).toMatch(/\? Bash wants to run: .*touch \/workspace\/marker/)
    expect(all.stderr).toContain('allowed (--approve-all)')
    expect(all.stderr).toMatch(/✓/)
    expect(all.code).toBe(0)

    const none = await berth(['run', ...body, '--deny-all'], env)
    expect(none.stderr).toContain('denied (--deny-all)')
    expect(none.stderr).toMatch(/✗ .*--deny-all/)

    const piped = await berth(['run', ...body], env, 'y\n')
    expect(piped.stderr).toContain('denied: stdin is not a terminal')
    expect(piped.stderr).toContain('--approve-all or --deny-all')
    // The agent was told why, and said so.
    expect(piped.stdout).toContain('no one was at a terminal')
    expect(piped.stderr).not.toContain('Allow?')

    const both = await berth(['run', ...body, '--approve-all', '--deny-all'], env)
    expect(both.code).toBe(2)
    expect(both.stderr).toContain('cannot be used together')
  })

  it('--output-schema (inline or a file) prints the validated answer as JSON; an answer the schema refuses fails the run', async () => {
    const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }
    const ok = await berth(
      ['run', '--profile', 'agent', '--output-schema', JSON.stringify(schema), 'Where? [[berth:json {"city":"Oslo"}]]'],
      env,
    )
    expect(ok.code).toBe(0)
    expect(JSON.parse(ok.stdout.slice(ok.stdout.indexOf('{')))).toEqual({ city: 'Oslo' })

    const dir = mkdtempSync(join(tmpdir(), 'berth-cli-schema-'))
    try {
      writeFileSync(join(dir, 'schema.json'), JSON.stringify(schema))
      const bad = await berth(
        [
          'run',
          '--profile',
          'agent',
          '--output-schema',
          join(dir, 'schema.json'),
          '--json',
          'Where? [[berth:json {"town":"Oslo"}]]',
        ],
        env,
      )
      expect(bad.code).toBe(1)
      expect(JSON.parse(bad.stdout)).toMatchObject({ status: 'failed', error: { code: 'OUTPUT_INVALID' } })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
    const notJson = await berth(['run', '--profile', 'agent', '--output-schema', '{nope', 'x'], env)
    expect(notJson.code).toBe(2)
    expect(notJson.stderr).toContain('--output-schema is not JSON')
  })

  it('berth approvals lists a waiting request; send, deny and approve decide it; interrupt stops a task mid-tool', async () => {
    const { task_id } = await t.submit({
      prompt: `Mark. ${TOUCH} [[berth:text Done.]]`,
      require_approval: ['Bash'],
    })
    let request: string | undefined
    for (let after = 0; !request; ) {
      const { events } = await t.api.tasks.events({ params: { id: task_id }, query: { after, limit: 100 } })
      const found = events.find((e) => e.type === 'permission_request')
      if (found) request = String(found.request_id)
      after = events.at(-1)?.seq ?? after
      if (!request) await pause()
    }
    const list = await berth(['approvals', task_id], env)
    expect(list.stdout).toMatch(new RegExp(`${request}\\s+Bash\\s+\\S+\\s+\\{"command":"touch /workspace/marker"\\}`))
    const listed = JSON.parse((await berth(['approvals', task_id, '--json'], env)).stdout) as {
      approvals: { request_id: string; status: string }[]
    }
    expect(listed.approvals).toEqual([expect.objectContaining({ request_id: request, status: 'pending' })])

    const sent = await berth(['send', task_id, 'Try another way'], env)
    expect(sent.code).toBe(0)
    expect(sent.stderr).toContain(`sent to ${task_id}`)
    const denied = await berth(['deny', task_id, request!, '-m', 'Not today'], env)
    expect(denied.code).toBe(0)
    expect(denied.stderr).toContain(`${request} (Bash) denied`)
    const again = await berth(['approve', task_id, request!], env)
    expect(again.code).toBe(2)
    expect(again.stderr).toContain('CONFLICT')

    const done = await t.waitDone(task_id)
    expect(done.status).toBe('completed')
    const events = await t.events(task_id)
    expect(events.filter((e) => e.type === 'user_message').map((e) => e.type === 'user_message' && e.text)).toContain(
      'Try another way',
    )
    expect(events.find((e) => e.type === 'permission_decision')).toMatchObject({
      decision: 'deny',
      message: 'Not today',
    })
    expect((await berth(['approvals', task_id], env)).stderr).toContain('no request')

    const sleeper = await t.submit({ prompt: `Wait. ${SLEEP} [[berth:text Slept.]]` })
    for (let seen = false; !seen; ) {
      const { events: log } = await t.api.tasks.events({ params: { id: sleeper.task_id }, query: { limit: 100 } })
      seen = log.some((e) => e.type === 'tool_call')
      if (!seen) await pause()
    }
    const stop = await berth(['interrupt', sleeper.task_id], env)
    expect(stop.code).toBe(0)
    expect(stop.stderr).toContain(`${sleeper.task_id} is cancelled (INTERRUPTED)`)
  })
})
