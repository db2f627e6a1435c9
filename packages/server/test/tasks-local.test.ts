/**
 * Agent tasks end to end on the `local` runtime: a real server, the real runner bundle and
 * the real Claude Agent SDK talking to the offline model, run as host processes in a
 * bubblewrap sandbox, and (one case) without a sandbox.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime, type SandboxMode } from '@berth/adapter-local'
import { silentLogger, type Task, type TranscriptEvent } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { startServer, type TestServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

type Json = Record<string, any>

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
  const { token } = await s.user()
  const call = async (method: string, path: string, json?: unknown) => {
    const res = await s.request(path, { method, token, ...(json !== undefined && { json }) })
    const text = await res.text()
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json }
  }
  const key = await call('POST', '/v1/api-keys', { name: 'offline', provider: 'stub' })
  const profile = await call('POST', '/v1/profiles', { name: 'Agent', slug: 'agent', api_key_id: key.body.id, default_tools: ['Bash'] })
  const waitDone = (taskId: string) =>
    vi.waitFor(async () => {
      const t = (await call('GET', `/v1/tasks/${taskId}`)).body as Task
      if (!['completed', 'failed', 'cancelled'].includes(t.status)) throw new Error(`still ${t.status}`)
      return t
    }, 90_000)
  const run = async (body: Json): Promise<Task> => {
    const sub = await call('POST', '/v1/tasks', { mode: 'batch', profile_id: profile.body.id, ...body })
    expect(sub.status, JSON.stringify(sub.body)).toBe(202)
    return waitDone(sub.body.task_id)
  }
  const events = async (taskId: string): Promise<TranscriptEvent[]> => (await call('GET', `/v1/tasks/${taskId}/events?limit=100`)).body.events
  const close = async () => {
    await s.close()
    const left = await onEngine(runtime, pool)
    await Promise.all(left.map((c) => runtime.remove(c.id)))
    rmSync(baseDir, { recursive: true, force: true })
  }
  return { s, runtime, pool, baseDir, call, run, waitDone, events, close, profileId: profile.body.id as string, keyId: key.body.id as string }
}

/** The README's first task: a Bash tool call, then text; with tokens, cost and turns. */
async function expectToolUse(t: Awaited<ReturnType<typeof localTaskServer>>, command: string): Promise<Task> {
  const task = await t.run({ prompt: `Check the shell. [[berth:tool Bash {"command":${JSON.stringify(command)}}]] [[berth:text All done: the shell works.]]` })
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
    const output = (await t.events(task.task_id)).find((e) => e.type === 'tool_result') as Json
    expect(output).toMatchObject({ is_error: false })
    expect(output.output).toContain('pwd=/workspace')
    expect(output.output).toContain('pid1=bwrap')
    const types = (await t.events(task.task_id)).map((e) => e.type)
    expect(types[0]).toBe('user_message')
    expect(types).toContain('token')
    expect(types.at(-1)).toBe('result')
    await vi.waitFor(async () => {
      const claimed = (await onEngine(t.runtime, t.pool)).filter((c) => c.labels['berth.workspace'] === task.workspace_id)
      expect(claimed).toEqual([])
    }, 15_000)
  })

  it('a session follow-up runs in the same container and remembers the first prompt', async () => {
    const first = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: t.profileId, prompt: 'Remember the codeword HERON-7.' })
    expect(first.status).toBe(202)
    const one = await t.waitDone(first.body.task_id)
    expect(one.status).toBe('completed')
    const ws = (await t.call('GET', `/v1/workspaces/${one.workspace_id}`)).body
    const second = await t.call('POST', '/v1/tasks', {
      mode: 'session',
      profile_id: t.profileId,
      session_id: one.session_id,
      prompt: 'What did I ask first? [[berth:recall]]',
    })
    const two = await t.waitDone(second.body.task_id)
    expect(two.status).toBe('completed')
    expect(two.result!.text).toContain('HERON-7')
    expect(two.workspace_id).toBe(one.workspace_id)
    expect((await t.call('GET', `/v1/workspaces/${one.workspace_id}`)).body.container_id).toBe(ws.container_id)
  })

  it('a secret printed by a tool reaches the tool but neither the stored events nor the result', async () => {
    const value = 'tok-LOCAL-SECRET-9e8d7c'
    const secret = await t.call('POST', '/v1/secrets', { name: 'MY_TOKEN', value })
    expect(secret.status).toBe(201)
    const task = await t.run({ prompt: 'Print it. [[berth:tool Bash {"command":"echo token=$MY_TOKEN"}]] [[berth:text printed]]' })
    expect(task.status).toBe('completed')
    const events = await t.events(task.task_id)
    const output = events.find((e) => e.type === 'tool_result') as Json
    expect(output.output).toContain('token=[REDACTED]')
    expect(JSON.stringify(events)).not.toContain(value)
    expect(JSON.stringify(task)).not.toContain(value)
    expect(s.logs.join('\n')).not.toContain(value)
    await t.call('DELETE', `/v1/secrets/${secret.body.id}`)
  })

  it("the server's own environment does not reach the agent's tools", async () => {
    process.env.BERTH_TEST_SERVER_ONLY = 'server-only-value-31337'
    try {
      const task = await t.run({ prompt: 'Env. [[berth:tool Bash {"command":"echo seen=${BERTH_TEST_SERVER_ONLY:-none}"}]] [[berth:text ok]]' })
      expect(task.status).toBe('completed')
      const output = (await t.events(task.task_id)).find((e) => e.type === 'tool_result') as Json
      expect(output.output).toContain('seen=none')
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
    const output = (await t.events(task.task_id)).find((e) => e.type === 'tool_result') as Json
    // The workspace is the container's directory under the runtime's base dir, not the host's /workspace.
    expect(output.output).toMatch(/pwd=\/.*\/root\/workspace/)
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
      const ws = (await t.call('GET', `/v1/workspaces/${wsId}`)).body
      expect(ws).toMatchObject({ status: 'idle', container_id: null })
      return ws
    }, 20_000)

  it('an idle session releases its container; a follow-up resumes the conversation in a new one', async () => {
    const first = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: t.profileId, prompt: 'The password is OSPREY-9.' })
    const one = await t.waitDone(first.body.task_id)
    expect(one.status).toBe('completed')
    const before = (await t.call('GET', `/v1/workspaces/${one.workspace_id}`)).body.container_id
    await idle(one.workspace_id!)
    await vi.waitFor(async () => expect((await onEngine(t.runtime, t.pool)).map((c) => c.labels['berth.container'])).not.toContain(before), 15_000)

    const next = await t.call('POST', '/v1/tasks', { mode: 'session', profile_id: t.profileId, session_id: one.session_id, prompt: 'Say it back. [[berth:recall]]' })
    const two = await t.waitDone(next.body.task_id)
    expect(two.status).toBe('completed')
    expect(two.result!.text).toContain('OSPREY-9')
  })

  it('with persistent_sessions the workspace files survive the release on a volume', async () => {
    const profile = await t.call('POST', '/v1/profiles', { name: 'Keeper', slug: 'keeper', api_key_id: t.keyId, default_tools: ['Bash'], persistent_sessions: true })
    const first = await t.call('POST', '/v1/tasks', {
      mode: 'session',
      profile_id: profile.body.id,
      prompt: 'Write a note. [[berth:tool Bash {"command":"echo kept-across-containers > note.txt"}]]',
    })
    const one = await t.waitDone(first.body.task_id)
    expect(one.status).toBe('completed')
    await idle(one.workspace_id!)
    const next = await t.call('POST', '/v1/tasks', {
      mode: 'session',
      profile_id: profile.body.id,
      session_id: one.session_id,
      prompt: 'Read it. [[berth:tool Bash {"command":"cat note.txt"}]] [[berth:recall]]',
    })
    const two = await t.waitDone(next.body.task_id)
    expect(two.status).toBe('completed')
    const events = await t.events(two.task_id)
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({ output: expect.stringContaining('kept-across-containers') })
    expect(two.result!.text).toContain('Write a note.')
    expect((await t.call('GET', `/v1/workspaces/${one.workspace_id}`)).body.persistent).toBe(true)
    expect((await t.call('DELETE', `/v1/workspaces/${one.workspace_id}`)).status).toBe(204)
  })
})
