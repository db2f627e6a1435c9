/**
 * Agent tasks end to end on the `local` runtime: a real server, the real runner bundle and
 * the real Claude Agent SDK talking to the offline model, run as host processes in a
 * bubblewrap sandbox, and (one case) without a sandbox.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime, type SandboxMode } from '@berth/adapter-local'
import { silentLogger, type Task } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { failure, startServer, type TestServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser } from './tasks.helpers.js'
import { sessionAndBatchEndWithTurn } from './background-work.helpers.js'

/** A server on the local runtime (sandbox as asked: `bwrap` throws where it cannot work, never skips). */
async function localTaskServer(sandbox: SandboxMode, opts: { sessionIdleMs?: number } = {}) {
  const baseDir = mkdtempSync(join(tmpdir(), `berth-local-tasks-${sandbox}-`))
  const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox })
  const pool = uniquePoolName(`local-${sandbox}`)
  const s = await startServer({
    runtime,
    pool: { image: 'local', min: 1, max: 4, name: pool },
    runner: { bundleDir: RUNNER_BUNDLE },
    ...(opts.sessionIdleMs !== undefined && { sessionIdleMs: opts.sessionIdleMs }),
  })
  await s.berth.ready
  const agent = await agentUser(s, { waitMs: 90_000 })
  const close = async () => {
    await s.close()
    const left = await onEngine(runtime, pool)
    await Promise.all(left.map((c) => runtime.remove(c.id)))
    rmSync(baseDir, { recursive: true, force: true })
  }
  return { s, runtime, pool, baseDir, close, ...agent }
}

/** The README's first task: a Bash tool call, then text; with tokens, cost and turns. */
async function expectToolUse(t: Awaited<ReturnType<typeof localTaskServer>>, command: string): Promise<Task> {
  const task = await t.run({
    prompt: `Check the shell. [[berth:tool Bash {"command":${JSON.stringify(command)}}]] [[berth:text All done: the shell works.]]`,
  })
  expect(task.error).toBeNull()
  expect(task.status).toBe('completed')
  const r = task.result!
  expect(r.text).toContain('All done: the shell works.')
  expect(r.tool_calls).toEqual([expect.objectContaining({ name: 'Bash', input: expect.objectContaining({ command }) })])
  expect(r.input_tokens).toBeGreaterThan(0)
  expect(r.output_tokens).toBeGreaterThan(0)
  expect(r.cost_usd).toBeGreaterThan(0)
  expect(r.turns).toBeGreaterThanOrEqual(2)
  return task
}

describe('tasks on local (bwrap sandbox)', () => {
  let t: Awaited<ReturnType<typeof localTaskServer>>
  let s: TestServer
  beforeAll(async () => {
    t = await localTaskServer('bwrap')
    s = t.s
  })
  afterAll(async () => {
    await t?.close()
  })

  it('a batch task runs Bash in the sandbox (at /workspace, as its own PID tree) and completes; its container is reaped', async () => {
    const task = await expectToolUse(t, 'echo "pwd=$(pwd) pid1=$(cat /proc/1/comm)"')
    const output = (await t.events(task.task_id)).find((e) => e.type === 'tool_result')
    expect(output).toMatchObject({ is_error: false, output: expect.stringContaining('pwd=/workspace') })
    expect(output).toMatchObject({ output: expect.stringContaining('pid1=bwrap') })
    const types = (await t.events(task.task_id)).map((e) => e.type)
    expect(types[0]).toBe('user_message')
    expect(types).toContain('token')
    expect(types.at(-1)).toBe('result')
    await vi.waitFor(async () => {
      const claimed = (await onEngine(t.runtime, t.pool)).filter(
        (c) => c.labels['berth.workspace'] === task.workspace_id,
      )
      expect(claimed).toEqual([])
    }, 15_000)
  })

  it('a session follow-up runs in the same container and remembers the first prompt', async () => {
    const first = await t.submit({ mode: 'session', prompt: 'Remember the codeword HERON-7.' })
    const one = await t.waitDone(first.task_id)
    expect(one.status).toBe('completed')
    const ws = await t.api.workspaces.get({ params: { id: one.workspace_id! } })
    const second = await t.submit({
      mode: 'session',
      session_id: one.session_id!,
      prompt: 'What did I ask first? [[berth:recall]]',
    })
    const two = await t.waitDone(second.task_id)
    expect(two.status).toBe('completed')
    expect(two.result!.text).toContain('HERON-7')
    expect(two.workspace_id).toBe(one.workspace_id)
    expect((await t.api.workspaces.get({ params: { id: one.workspace_id! } })).container_id).toBe(ws.container_id)
  })

  it('a session task and a batch task whose agent starts a run_in_background server end completed with their turn', async () => {
    await sessionAndBatchEndWithTurn(t)
  }, 600_000)

  it('a secret printed by a tool reaches the tool but neither the stored events nor the result', async () => {
    const value = 'tok-LOCAL-SECRET-9e8d7c'
    const secret = await t.api.secrets.create({ body: { name: 'MY_TOKEN', value } })
    const task = await t.run({
      prompt: 'Print it. [[berth:tool Bash {"command":"echo token=$MY_TOKEN"}]] [[berth:text printed]]',
    })
    expect(task.status).toBe('completed')
    const events = await t.events(task.task_id)
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({
      output: expect.stringContaining('token=[REDACTED]'),
    })
    expect(JSON.stringify(events)).not.toContain(value)
    expect(JSON.stringify(task)).not.toContain(value)
    expect(s.logs.join('\n')).not.toContain(value)
    await t.api.secrets.delete({ params: { id: secret.id } })
  })

  it("the server's own environment does not reach the agent's tools", async () => {
    process.env.BERTH_TEST_SERVER_ONLY = 'server-only-value-31337'
    try {
      const task = await t.run({
        // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion for the agent's Bash, not a template
        prompt: 'Env. [[berth:tool Bash {"command":"echo seen=${BERTH_TEST_SERVER_ONLY:-none}"}]] [[berth:text ok]]',
      })
      expect(task.status).toBe('completed')
      expect((await t.events(task.task_id)).find((e) => e.type === 'tool_result')).toMatchObject({
        output: expect.stringContaining('seen=none'),
      })
    } finally {
      delete process.env.BERTH_TEST_SERVER_ONLY
    }
  })
})

describe('tasks on local (no sandbox)', () => {
  let t: Awaited<ReturnType<typeof localTaskServer>>
  beforeAll(async () => {
    t = await localTaskServer('none')
  })
  afterAll(async () => {
    await t?.close()
  })

  it('a batch task runs Bash as a host process in the container directory and completes', async () => {
    const task = await expectToolUse(t, 'echo "pwd=$(pwd)"')
    // The workspace is the container's directory under the runtime's base dir, not the host's /workspace.
    expect((await t.events(task.task_id)).find((e) => e.type === 'tool_result')).toMatchObject({
      output: expect.stringMatching(/pwd=\/.*\/root\/workspace/),
    })
  })
})

describe('sessions on local (bwrap): idle release and restore', () => {
  let t: Awaited<ReturnType<typeof localTaskServer>>
  beforeAll(async () => {
    t = await localTaskServer('bwrap', { sessionIdleMs: 400 })
  })
  afterAll(async () => {
    await t?.close()
  })

  const idle = (wsId: string) =>
    vi.waitFor(async () => {
      const ws = await t.api.workspaces.get({ params: { id: wsId } })
      expect(ws).toMatchObject({ status: 'idle', container_id: null })
      return ws
    }, 20_000)

  it('an idle session releases its container; a follow-up resumes the conversation in a new one', async () => {
    const first = await t.submit({ mode: 'session', prompt: 'The password is OSPREY-9.' })
    const one = await t.waitDone(first.task_id)
    expect(one.status).toBe('completed')
    const before = (await t.api.workspaces.get({ params: { id: one.workspace_id! } })).container_id
    await idle(one.workspace_id!)
    await vi.waitFor(
      async () =>
        expect((await onEngine(t.runtime, t.pool)).map((c) => c.labels['berth.container'])).not.toContain(before),
      15_000,
    )

    const next = await t.submit({
      mode: 'session',
      session_id: one.session_id!,
      prompt: 'Say it back. [[berth:recall]]',
    })
    const two = await t.waitDone(next.task_id)
    expect(two.status).toBe('completed')
    expect(two.result!.text).toContain('OSPREY-9')
  })

  it('with persistent_sessions the workspace files survive the release on a volume', async () => {
    const profile = await t.api.profiles.create({
      body: { name: 'Keeper', slug: 'keeper', api_key_id: t.keyId, default_tools: ['Bash'], persistent_sessions: true },
    })
    const first = await t.submit({
      mode: 'session',
      profile_id: profile.id,
      prompt: 'Write a note. [[berth:tool Bash {"command":"echo kept-across-containers > note.txt"}]]',
    })
    const one = await t.waitDone(first.task_id)
    expect(one.status).toBe('completed')
    await idle(one.workspace_id!)
    const next = await t.submit({
      mode: 'session',
      profile_id: profile.id,
      session_id: one.session_id!,
      prompt: 'Read it. [[berth:tool Bash {"command":"cat note.txt"}]] [[berth:recall]]',
    })
    const two = await t.waitDone(next.task_id)
    expect(two.status).toBe('completed')
    const events = await t.events(two.task_id)
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({
      output: expect.stringContaining('kept-across-containers'),
    })
    expect(two.result!.text).toContain('Write a note.')
    expect((await t.api.workspaces.get({ params: { id: one.workspace_id! } })).persistent).toBe(true)
    await t.api.workspaces.delete({ params: { id: one.workspace_id! } })
    expect((await failure(t.api.workspaces.get({ params: { id: one.workspace_id! } }))).status).toBe(404)
  })
})
