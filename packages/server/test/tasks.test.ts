import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { ENGINES, onEngine, sweep } from './pool.helpers.js'
import { ADMIN_TOKEN, clientFor, failure } from './helpers.js'
import { taskServer } from './tasks.helpers.js'
import { sessionAndBatchEndWithTurn } from './background-work.helpers.js'

type TaskServer = Awaited<ReturnType<typeof taskServer>>
/** A workspace as its owner reads it. */
const workspace = (t: TaskServer, id: string | null) => t.api.workspaces.get({ params: { id: id! } })

describe.each(ENGINES)('tasks on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer(engine)
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it('a batch task uses a tool and completes with text, tool calls, tokens, cost and turns; its container is reaped', async () => {
    const task = await t.run({
      prompt:
        'Check the shell. [[berth:tool Bash {"command":"echo hello-from-bash"}]] [[berth:text All done: the shell works.]]',
    })
    expect(task.status).toBe('completed')
    expect(task.error).toBeNull()
    const r = task.result!
    expect(r.text).toContain('All done: the shell works.')
    expect(r.tool_calls).toEqual([
      expect.objectContaining({ name: 'Bash', input: expect.objectContaining({ command: 'echo hello-from-bash' }) }),
    ])
    expect(r.input_tokens).toBeGreaterThan(0)
    expect(r.output_tokens).toBeGreaterThan(0)
    expect(r.cost_usd).toBeGreaterThan(0)
    expect(r.turns).toBeGreaterThanOrEqual(2)

    const events = await t.events(task.task_id)
    const types = events.map((e) => e.type)
    expect(types[0]).toBe('user_message')
    expect(types).toContain('token')
    expect(types.at(-1)).toBe('result')
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({
      output: expect.stringContaining('hello-from-bash'),
      is_error: false,
    })
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => events[0]!.seq + i))

    // The workspace is idle and its container gone from the engine.
    const ws = await workspace(t, task.workspace_id)
    expect(ws).toMatchObject({ status: 'idle', container_id: null })
    await vi.waitFor(async () => {
      const claimed = (await onEngine(t.runtime, t.pool)).filter(
        (c) => c.labels['berth.workspace'] === task.workspace_id,
      )
      expect(claimed).toEqual([])
      expect(t.s.berth.pool!.list().some((c) => c.workspace_id === task.workspace_id)).toBe(false)
    }, 15_000)
  })

  it('a session of three prompts runs in one warm container and remembers the first prompt', async () => {
    const first = await t.submit({ mode: 'session', prompt: 'Remember the codeword PELICAN-42.' })
    const one = await t.waitDone(first.task_id)
    expect(one.status).toBe('completed')
    expect(one.session_id).toMatch(/^sess_/)
    const ws1 = await workspace(t, one.workspace_id)
    expect(ws1.status).toBe('running')
    expect(ws1.container_id).toMatch(/^ctr_/)

    const second = await t.submit({ mode: 'session', session_id: one.session_id!, prompt: 'Anything new?' })
    const two = await t.waitDone(second.task_id)
    expect(two.status).toBe('completed')
    const third = await t.submit({
      mode: 'session',
      session_id: one.session_id!,
      prompt: 'What did I ask first? [[berth:recall]]',
    })
    const three = await t.waitDone(third.task_id)
    expect(three.status).toBe('completed')
    expect(three.result!.text).toContain('PELICAN-42')
    expect([two.workspace_id, three.workspace_id]).toEqual([one.workspace_id, one.workspace_id])
    expect((await workspace(t, one.workspace_id)).container_id).toBe(ws1.container_id)

    // The transcript holds all three prompts, in order, with dense seq.
    const transcript = await t.api.workspaces.transcript({ params: { id: one.workspace_id! }, query: { limit: 100 } })
    const prompts = transcript.events.filter((e) => e.type === 'user_message').map((e) => e.text)
    expect(prompts).toEqual([
      'Remember the codeword PELICAN-42.',
      'Anything new?',
      'What did I ask first? [[berth:recall]]',
    ])
  })

  it("a session's agent lives between follow-ups with its background server; a batch task's goes with its container", async () => {
    await sessionAndBatchEndWithTurn(t)
  }, 600_000)

  it('max_turns fails with TURN_LIMIT_EXCEEDED and keeps the partial turns', async () => {
    const task = await t.run({ prompt: 'Loop. [[berth:turns 6]]', max_turns: 2 })
    expect(task.status).toBe('failed')
    expect(task.error!.code).toBe('TURN_LIMIT_EXCEEDED')
    expect(task.result!.turns).toBeGreaterThanOrEqual(2)
    expect(task.result!.cost_usd).toBeGreaterThan(0)
  })

  it('max_budget_usd fails with BUDGET_EXCEEDED and keeps the partial cost', async () => {
    const task = await t.run({
      prompt: 'Spend. [[berth:usage input=400000 output=50000]] [[berth:turns 4]]',
      max_budget_usd: 0.5,
    })
    expect(task.status).toBe('failed')
    expect(task.error!.code).toBe('BUDGET_EXCEEDED')
    expect(task.result!.cost_usd).toBeGreaterThan(0.5)
  })

  it('a model error fails with MODEL_ERROR', async () => {
    const task = await t.run({ prompt: 'Fail please. [[berth:error overloaded]]' })
    expect(task.status).toBe('failed')
    expect(task.error!.code).toBe('MODEL_ERROR')
  })
})

describe('tasks on podman: cancel, secrets, concurrency', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer('podman', { concurrency: 5, max: 8 })
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it('cancel stops a running task (its container reaped); cancelling a finished task changes nothing', async () => {
    const sub = await t.submit({ prompt: 'Take your time. [[berth:slow 300]] [[berth:turns 8]]' })
    await vi.waitFor(
      async () => expect((await t.api.tasks.get({ params: { id: sub.task_id } })).status).toBe('running'),
      30_000,
    )
    // Some output has arrived: the run is really under way.
    await vi.waitFor(
      async () => expect((await t.events(sub.task_id)).some((e) => e.type === 'token')).toBe(true),
      30_000,
    )
    const cancelled = await t.api.tasks.cancel({ params: { id: sub.task_id } })
    expect(cancelled.status).toBe('cancelled')
    expect(cancelled.finished_at).not.toBeNull()
    const ws = cancelled.workspace_id
    await vi.waitFor(async () => expect(t.s.berth.pool!.list().some((c) => c.workspace_id === ws)).toBe(false), 15_000)

    const done = await t.run({ prompt: 'Quick one.' })
    expect(done.status).toBe('completed')
    const again = await t.api.tasks.cancel({ params: { id: done.task_id } })
    expect(again).toEqual(done)
  })

  it('a secret printed by a tool is in neither the stored events nor the result', async () => {
    const value = 'tok-SECRET-4f9a8b7c6d'
    const secret = await t.api.secrets.create({ body: { name: 'MY_TOKEN', value } })
    const task = await t.run({
      prompt: 'Print it. [[berth:tool Bash {"command":"echo token=$MY_TOKEN"}]] [[berth:text printed]]',
    })
    expect(task.status).toBe('completed')
    const events = await t.events(task.task_id)
    // The tool really saw the value (it printed something in its place), and it was redacted.
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({
      output: expect.stringContaining('token=[REDACTED]'),
    })
    expect(JSON.stringify(events)).not.toContain(value)
    expect(JSON.stringify(task)).not.toContain(value)
    expect(t.s.logs.join('\n')).not.toContain(value)
    await t.api.secrets.delete({ params: { id: secret.id } })
  })

  it('twenty parallel session submissions admit exactly five; the rest are refused while they run', async () => {
    const subs = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => t.submit({ mode: 'session', prompt: `Session ${i}` })),
    )
    const admitted = subs.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))
    const refused = await Promise.all(
      subs.flatMap((r) => (r.status === 'rejected' ? [failure(Promise.reject(r.reason))] : [])),
    )
    expect(admitted).toHaveLength(5)
    expect(refused.map((e) => e.status)).toEqual(Array(15).fill(429))
    expect(refused[0]).toMatchObject({ code: 'CONCURRENCY_LIMIT', details: { limit: 5, running: 5 } })

    const done = await Promise.all(admitted.map((r) => t.waitDone(r.task_id)))
    expect(done.map((d) => d.status)).toEqual(Array(5).fill('completed'))
    // The five sessions stay warm and hold their slots (idle, one would yield its slot to a sixth: idle-yield.test.ts);
    // a follow-up to a warm session is not a new workspace.
    const admin = clientFor(t.s, ADMIN_TOKEN)
    const running = async () =>
      (await admin.admin.limits()).concurrency.profiles.find((p) => p.profile_id === t.profileId)?.running
    expect(await running()).toBe(5)
    const follow = await t.submit({ mode: 'session', session_id: done[0]!.session_id!, prompt: 'follow-up' })
    expect((await t.waitDone(follow.task_id)).status).toBe('completed')
    expect(await running()).toBe(5)
    // Deleting a session removes its container from the engine, its row and transcript, and frees its slot.
    const doomed = t.s.berth.pool!.list().find((c) => c.workspace_id === done[1]!.workspace_id)!
    expect(doomed.state).toBe('in_use')
    await t.api.workspaces.delete({ params: { id: done[1]!.workspace_id! } })
    expect((await onEngine(t.runtime, t.pool)).map((c) => c.labels['berth.container'])).not.toContain(doomed.id)
    expect((await failure(t.api.workspaces.transcript({ params: { id: done[1]!.workspace_id! } }))).status).toBe(404)
    expect(await running()).toBe(4)
  })
})

describe('sessions on podman: idle release and restore', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  beforeAll(async () => {
    t = await taskServer('podman', { sessionIdleMs: 400 })
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  const idle = (wsId: string) =>
    vi.waitFor(async () => {
      const ws = await workspace(t, wsId)
      expect(ws).toMatchObject({ status: 'idle', container_id: null })
      return ws
    }, 20_000)

  it('an idle session releases its container; a follow-up resumes the conversation in a new one', async () => {
    const first = await t.submit({ mode: 'session', prompt: 'The password is OSPREY-7.' })
    const one = await t.waitDone(first.task_id)
    const before = (await workspace(t, one.workspace_id)).container_id
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
    expect(two.result!.text).toContain('OSPREY-7')
    await idle(one.workspace_id!)
  })

  it('with persistent_sessions the workspace files survive the release on a volume, and deleting the workspace removes it', async () => {
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

    const id = one.workspace_id!
    await t.api.workspaces.delete({ params: { id } })
    expect((await failure(t.api.workspaces.get({ params: { id } }))).status).toBe(404)
    expect((await failure(t.api.workspaces.transcript({ params: { id } }))).status).toBe(404)
    expect((await failure(t.api.workspaces.delete({ params: { id } }))).status).toBe(404)
  })
})
