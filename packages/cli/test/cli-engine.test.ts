/**
 * `berth` spawned as a real process (the package's bin, built output) against a real
 * server running real tasks on Docker and Podman.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ensureEngines } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { backgroundServerPrompt, serverPort } from '../../server/test/background-work.helpers.js'
import { ENGINES, sweep } from '../../server/test/pool.helpers.js'
import setupRunner from '../../server/test/runner.global-setup.js'
import { taskServer } from '../../server/test/tasks.helpers.js'
import { runBin } from './cli.helpers.js'

/** Run `berth …` to its end; stdout, stderr and the exit code. */
const berth = runBin

beforeAll(async () => {
  ensureEngines(['podman', 'docker'])
  await setupRunner()
})

describe.each(ENGINES)('berth CLI on %s', (engine) => {
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

  it('berth run streams the text, shows the tool call and the cost, and exits 0', async () => {
    const run = await berth(
      [
        'run',
        '--profile',
        'agent',
        'Check. [[berth:tool Bash {"command":"echo cli-tool-ran"}]] [[berth:text The CLI streamed this answer.]]',
      ],
      env,
    )
    expect(run.stderr).toMatch(/▸ Bash .*echo cli-tool-ran/)
    expect(run.stderr).toMatch(/✓ cli-tool-ran/)
    expect(run.stdout).toContain('The CLI streamed this answer.')
    expect(run.stderr).toMatch(/completed · 2 turns · \d+ in \/ \d+ out tokens · \$\d+\.\d{4} · task_/)
    expect(run.code).toBe(0)
    // What it printed is the task's own text, and the task is listed.
    const ls = await berth(['tasks', 'ls', '--json'], env)
    const { tasks } = JSON.parse(ls.stdout) as {
      tasks: { task_id: string; status: string; result: { text: string } }[]
    }
    expect(tasks[0]!.status).toBe('completed')
    expect(run.stdout).toContain(tasks[0]!.result.text.trim())
  })

  it('berth run exits non-zero on TURN_LIMIT_EXCEEDED; --json prints the failed task', async () => {
    const run = await berth(
      ['run', '--profile', 'agent', '--max-turns', '1', '--json', 'Keep going. [[berth:turns 5]]'],
      env,
    )
    expect(run.code).toBe(1)
    const task = JSON.parse(run.stdout) as { status: string; error: { code: string } }
    expect(task).toMatchObject({ status: 'failed', error: { code: 'TURN_LIMIT_EXCEEDED' } })
    // A bad flag value is the server's 400, shown with its issue, exit 2.
    const bad = await berth(['run', '--profile', 'agent', '--priority', 'urgent', 'x'], env)
    expect(bad.code).not.toBe(0)
    const unknown = await berth(['run', '--profile', 'no-such-profile', 'x'], env)
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toContain('No profile with slug "no-such-profile"')
  })

  it('berth sessions takes follow-ups line by line; berth files put and get round-trip a file in its workspace; berth sessions fork copies the session', async () => {
    const chat = await berth(
      ['sessions', '--profile', 'agent'],
      env,
      'The password is OSPREY.\nWhat did I say first? [[berth:recall]]\n',
    )
    expect(chat.code).toBe(0)
    expect(chat.stdout).toContain('The first prompt was: The password is OSPREY.')
    const sessionId = /session (sess_[a-z0-9]+)/.exec(chat.stderr)?.[1]
    expect(sessionId).toBeDefined()
    const { workspaces } = JSON.parse((await berth(['sessions', 'ls', '--json'], env)).stdout) as {
      workspaces: { id: string; session_id: string }[]
    }
    const ws = workspaces.find((w) => w.session_id === sessionId)!.id

    const dir = mkdtempSync(join(tmpdir(), 'berth-cli-files-'))
    try {
      const bytes = randomBytes(50_000)
      writeFileSync(join(dir, 'payload.bin'), bytes)
      expect((await berth(['files', 'put', ws, join(dir, 'payload.bin'), '--dir', 'in'], env)).code).toBe(0)
      const ls = await berth(['files', 'ls', ws, 'in'], env)
      expect(ls.stdout).toMatch(/file\s+50000\s+\S+\s+payload\.bin/)
      expect((await berth(['files', 'get', ws, 'in/payload.bin', '--out', join(dir, 'out')], env)).code).toBe(0)
      expect(readFileSync(join(dir, 'out/in/payload.bin')).equals(bytes)).toBe(true)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }

    // A fork remembers the conversation; the new session goes on from there.
    const forked = await berth(['sessions', 'fork', ws, '--json'], env)
    expect(forked.code, forked.stderr).toBe(0)
    const fork = JSON.parse(forked.stdout) as { id: string; session_id: string; forked_from: { workspace_id: string } }
    expect(fork.forked_from.workspace_id).toBe(ws)
    const inFork = await berth(
      ['sessions', '--profile', 'agent', '--session', fork.session_id],
      env,
      'And first? [[berth:recall]]\n',
    )
    expect(inFork.stdout).toContain('The first prompt was: The password is OSPREY.')
    const busy = await berth(['sessions', 'fork', ws, '--at', 'task_zzzzzzzzzzzzzzzzzzzz'], env)
    expect(busy.code).not.toBe(0)
    expect(busy.stderr).toContain('task_zzzzzzzzzzzzzzzzzzzz not found')
  })

  it('berth sessions checkpoints lists each finished task; fork --at an earlier one and rewind --to one go back to it', async () => {
    const write = (word: string) => `Word ${word}. [[berth:tool Bash {"command":"echo ${word} > state.txt"}]]`
    const chat = await berth(
      ['sessions', '--profile', 'agent'],
      env,
      `${['one', 'two', 'three'].map(write).join('\n')}\n`,
    )
    expect(chat.code, chat.stderr).toBe(0)
    const sessionId = /session (sess_[a-z0-9]+)/.exec(chat.stderr)![1]!
    const { workspaces } = await t.api.workspaces.list({ query: { limit: 100 } })
    const ws = workspaces.find((w) => w.session_id === sessionId)!.id

    const listed = await berth(['sessions', 'checkpoints', ws], env)
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toMatch(/^TASK +KEPT AT +FILES +SIZE +ADDED$/m)
    expect(listed.stderr).toContain('3 checkpoints')
    const { checkpoints } = JSON.parse((await berth(['sessions', 'checkpoints', ws, '--json'], env)).stdout) as {
      checkpoints: { task_id: string }[]
    }
    const [one, two, three] = checkpoints.map((c) => c.task_id)
    expect(listed.stdout).toMatch(new RegExp(`^${one} +\\S+ +\\d+ +[\\d.]+ (B|KiB|MiB) +[\\d.]+ (B|KiB|MiB)$`, 'm'))
    const ask = 'What now? [[berth:tool Bash {"command":"cat state.txt"}]] [[berth:recall_all]]\n'

    // A fork at task 1: its files and memory.
    const forked = await berth(['sessions', 'fork', ws, '--at', one!, '--json'], env)
    expect(forked.code, forked.stderr).toBe(0)
    const fork = JSON.parse(forked.stdout) as { session_id: string; forked_from: unknown }
    expect(fork.forked_from).toEqual({ workspace_id: ws, task_id: one })
    const inFork = await berth(['sessions', '--profile', 'agent', '--session', fork.session_id], env, ask)
    expect(inFork.stderr).toMatch(/✓ one$/m)
    expect(inFork.stdout).toContain('The earlier prompts were: Word one.')
    expect(inFork.stdout).not.toContain('two')

    // The session itself back at task 2: task 3 is marked, and can be gone back to no more.
    const rewind = await berth(['sessions', 'rewind', ws, '--to', two!], env)
    expect(rewind.code, rewind.stderr).toBe(0)
    expect(rewind.stderr).toContain(`rewound ${ws} to ${two}`)
    expect((await t.api.tasks.get({ params: { id: three! } })).rewound_at).toEqual(expect.any(String))
    const back = await berth(['sessions', 'rewind', ws, '--to', three!], env)
    expect(back.code).toBe(2)
    expect(back.stderr).toMatch(/CONFLICT: .*rewound/)
    const after = await berth(['sessions', '--profile', 'agent', '--session', sessionId], env, ask)
    expect(after.stderr).toMatch(/✓ two$/m)
    expect(after.stdout).toContain('The earlier prompts were: Word one. | Word two.')
    expect(after.stdout).not.toContain('three')
  }, 180_000)

  it('berth sessions show lists what the living agent runs in the background; berth sessions stop ends it, refused while a task runs', async () => {
    const port = serverPort()
    const chat = await berth(['sessions', '--profile', 'agent'], env, `${backgroundServerPrompt(port)}\n`)
    expect(chat.code, chat.stderr).toBe(0)
    const sessionId = /session (sess_[a-z0-9]+)/.exec(chat.stderr)![1]!
    const { workspaces } = await t.api.workspaces.list({ query: { limit: 100 } })
    const ws = workspaces.find((w) => w.session_id === sessionId)!.id

    const shown = await vi.waitFor(
      async () => {
        const show = await berth(['sessions', 'show', ws], env)
        expect(show.code, show.stderr).toBe(0)
        expect(show.stdout).toMatch(new RegExp(`local_bash +\\S+ +\\d+ (s|min) +node -e .*listen\\(${port}\\)`))
        return show
      },
      { timeout: 60_000, interval: 500 },
    )
    expect(shown.stdout).toMatch(/^status +running$/m)
    expect(shown.stdout).toMatch(/^agent +up since \S+ \(\d+ (s|min)\), 1 task served$/m)
    expect(shown.stdout).toMatch(/^BACKGROUND +KIND +SINCE +RUNNING FOR +WHAT$/m)

    // A task queued or running: stop is the server's 409, printed, exit 2.
    const slow = await t.submit({
      mode: 'session',
      session_id: sessionId,
      prompt: 'Take long. [[berth:slow 200]] [[berth:turns 6]]',
    })
    const busy = await berth(['sessions', 'stop', ws], env)
    expect(busy.code).toBe(2)
    expect(busy.stderr).toMatch(/CONFLICT: .*(queued|under way|running)/)
    await t.api.tasks.cancel({ params: { id: slow.task_id } })
    await t.waitDone(slow.task_id)

    const stop = await berth(['sessions', 'stop', ws], env)
    expect(stop.code, stop.stderr).toBe(0)
    expect(stop.stderr).toContain(`stopped ${ws}: no agent or background process runs`)
    const after = await berth(['sessions', 'show', ws], env)
    expect(after.stdout).toMatch(/^status +idle$/m)
    expect(after.stdout).toMatch(/^agent +none \(the next follow-up starts one/m)
    expect(after.stdout).not.toContain('BACKGROUND')
    expect(JSON.parse((await berth(['sessions', 'show', ws, '--json'], env)).stdout)).toMatchObject({
      id: ws,
      agent: null,
    })
  }, 180_000)
})
