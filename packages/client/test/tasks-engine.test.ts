/**
 * The caller's SDK against a real server running real tasks in containers on Docker and
 * Podman (the runner and the offline model inside): run, stream across a dropped
 * connection, a session of three prompts, a binary file round trip, forks, checkpoints and
 * rewinds, and a session's living agent seen and stopped.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ensureEngines } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { createBerthClient, type NodeBerthClient, type TaskEvent } from '@berth/client/node'
import { backgroundServerPrompt, serverPort } from '../../server/test/background-work.helpers.js'
import { ENGINES, sweep } from '../../server/test/pool.helpers.js'
import setupRunner from '../../server/test/runner.global-setup.js'
import { taskServer } from '../../server/test/tasks.helpers.js'
import { startProxy } from './proxy.js'

beforeAll(async () => {
  ensureEngines(['podman', 'docker'])
  await setupRunner()
})

describe.each(ENGINES)('@berth/client running tasks on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let berth: NodeBerthClient
  const dirs: string[] = []
  beforeAll(async () => {
    t = await taskServer(engine)
    berth = createBerthClient({ baseURL: t.s.url, token: t.token })
  })
  afterAll(async () => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it('tasks.run submits over the WebSocket and resolves with the completed task and its tool call', async () => {
    const events: TaskEvent[] = []
    const task = await berth.tasks.run(
      {
        profile_id: t.profileId,
        prompt: 'Use the shell. [[berth:tool Bash {"command":"echo run-helper-ok"}]] [[berth:text Ran it.]]',
      },
      { onEvent: (e) => events.push(e) },
    )
    expect(task.status).toBe('completed')
    expect(task.result!.text).toContain('Ran it.')
    expect(task.result!.tool_calls).toEqual([
      expect.objectContaining({ name: 'Bash', input: expect.objectContaining({ command: 'echo run-helper-ok' }) }),
    ])
    // onEvent saw the whole log, once each, in order, as typed events.
    const log = await t.events(task.task_id)
    expect(events.map((e) => e.seq)).toEqual(log.map((e) => e.seq))
    const result = events.find((e) => e.type === 'tool_result')
    expect(result?.type === 'tool_result' && result.output).toContain('run-helper-ok')
    expect(events.at(-1)?.type).toBe('result')
  })

  it('tasks.stream survives a dropped connection mid-task: no gap, no duplicate seq', async () => {
    const proxy = await startProxy(t.s.url)
    try {
      const viaProxy = createBerthClient({ baseURL: proxy.url, token: t.token })
      const { task_id } = await berth.tasks.submit({
        body: {
          mode: 'batch',
          profile_id: t.profileId,
          prompt: 'Work slowly. [[berth:slow 40]] [[berth:turns 4]] [[berth:text finished despite the drop]]',
        },
      })
      const seen: TaskEvent[] = []
      let droppedWhile: string | undefined
      for await (const event of viaProxy.tasks.stream(task_id)) {
        seen.push(event)
        if (!droppedWhile && event.type === 'tool_call') {
          expect(proxy.dropAll()).toBeGreaterThan(0)
          droppedWhile = (await berth.tasks.get({ params: { id: task_id } })).status
        }
      }
      expect(droppedWhile).toBe('running')
      // It reconnected over the WebSocket rather than ending or failing.
      expect(proxy.upgrades()).toBeGreaterThanOrEqual(2)
      const log = await t.events(task_id)
      expect(seen.map((e) => e.seq)).toEqual(log.map((e) => e.seq))
      expect(new Set(seen.map((e) => e.seq)).size).toBe(seen.length)
      expect(seen.at(-1)).toMatchObject({ type: 'result', text: expect.stringContaining('finished despite the drop') })
    } finally {
      await proxy.close()
    }
  })

  it('tasks.run falls back to HTTP and polling when the WebSocket is refused; aborting cancels the task', async () => {
    const proxy = await startProxy(t.s.url, { refuseUpgrades: true })
    try {
      const noSocket = createBerthClient({ baseURL: proxy.url, token: t.token, pollInterval: 200 })
      const events: TaskEvent[] = []
      const task = await noSocket.tasks.run(
        {
          profile_id: t.profileId,
          prompt: 'Poll me. [[berth:tool Bash {"command":"echo polled"}]] [[berth:text Polled fine.]]',
        },
        { onEvent: (e) => events.push(e) },
      )
      expect(proxy.upgrades()).toBeGreaterThanOrEqual(1)
      expect(task.status).toBe('completed')
      expect(task.result!.text).toContain('Polled fine.')
      expect(events.map((e) => e.seq)).toEqual((await t.events(task.task_id)).map((e) => e.seq))

      const controller = new AbortController()
      let submitted: string | undefined
      const aborted = noSocket.tasks.run(
        { profile_id: t.profileId, prompt: 'Take long. [[berth:slow 200]] [[berth:turns 6]]' },
        {
          signal: controller.signal,
          onSubmitted: (id) => (submitted = id),
          onEvent: (e) => e.type === 'turn_start' && controller.abort(),
        },
      )
      await expect(aborted).rejects.toMatchObject({ name: 'BerthError', code: 'ABORTED' })
      expect((await t.waitDone(submitted!)).status).toBe('cancelled')
    } finally {
      await proxy.close()
    }
  })

  it('a three-prompt session remembers the first prompt, and a binary file round-trips byte for byte', async () => {
    const session = berth.sessions.start({ profile_id: t.profileId })
    const one = await session.send('Remember the codeword HERON-77.')
    expect(one.status).toBe('completed')
    expect(session.id).toMatch(/^sess_/)
    await session.send('Anything new?')
    const three = await session.send('What did I say first? [[berth:recall]]')
    expect(three.result!.text).toContain('The first prompt was: Remember the codeword HERON-77.')
    expect(session.tasks.map((x) => x.session_id)).toEqual([session.id, session.id, session.id])
    expect(new Set(session.tasks.map((x) => x.workspace_id)).size).toBe(1)

    // Every byte value, and random bytes: from memory and from a path.
    const bytes = new Uint8Array([...Array.from({ length: 256 }, (_, i) => i), ...randomBytes(200_000)])
    const dir = mkdtempSync(join(tmpdir(), 'berth-client-files-'))
    dirs.push(dir)
    writeFileSync(join(dir, 'from-path.bin'), bytes.subarray(1000))
    const up = await berth.files.upload(
      session.workspaceId!,
      [{ name: 'blob.bin', data: bytes }, join(dir, 'from-path.bin')],
      { dir: 'inputs' },
    )
    expect(up.files.map((f) => [f.name, f.size])).toEqual([
      ['blob.bin', bytes.length],
      ['from-path.bin', bytes.length - 1000],
    ])
    const listing = await berth.files.list(session.workspaceId!, 'inputs')
    expect(listing.entries.map((e) => e.name)).toEqual(['blob.bin', 'from-path.bin'])

    const out = join(dir, 'out')
    const written = await berth.files.downloadTo(session.workspaceId!, 'inputs', out)
    expect(written).toEqual(expect.arrayContaining(['inputs/blob.bin', 'inputs/from-path.bin']))
    expect(Buffer.compare(readFileSync(join(out, 'inputs/blob.bin')), Buffer.from(bytes))).toBe(0)
    expect(Buffer.compare(readFileSync(join(out, 'inputs/from-path.bin')), Buffer.from(bytes.subarray(1000)))).toBe(0)
    await session.close({ deleteWorkspace: true })
    await expect(session.send('after close')).rejects.toThrow(/closed/)
  })

  it('session.fork: a new session that remembers the conversation so far; the original goes on unchanged', async () => {
    const session = berth.sessions.start({ profile_id: t.profileId })
    await session.send('The code word is HARBOUR.')
    const fork = await session.fork()
    expect(fork.id).toMatch(/^sess_/)
    expect(fork.id).not.toBe(session.id)
    await session.send('And now it is LANTERN.')
    const answer = await fork.send('Which came before? [[berth:recall_all]]')
    expect(answer.result!.text).toContain('The earlier prompts were: The code word is HARBOUR.')
    expect(answer.result!.text).not.toContain('LANTERN')
    expect((await berth.workspaces.get({ params: { id: fork.workspaceId! } })).forked_from).toEqual({
      workspace_id: session.workspaceId,
      task_id: session.tasks[0]!.task_id,
    })
    await fork.close({ deleteWorkspace: true })
    await session.close({ deleteWorkspace: true })
  })

  it('session.checkpoints() lists its finished tasks; session.fork({ atTaskId }) and session.rewind() go back to an earlier one', async () => {
    const session = berth.sessions.start({ profile_id: t.profileId })
    const bash = (command: string) => `[[berth:tool Bash ${JSON.stringify({ command })}]]`
    const state = async (s: typeof session) => {
      const task = await s.send(`What now? ${bash('cat state.txt')} [[berth:recall_all]]`)
      expect(task.status, JSON.stringify(task.error)).toBe('completed')
      const out = (await t.events(task.task_id)).flatMap((e) => (e.type === 'tool_result' ? [String(e.output)] : []))
      return { file: out.join('').trim(), memory: task.result!.text }
    }
    const one = await session.send(`Word one. ${bash('echo one > state.txt')}`)
    const two = await session.send(`Word two. ${bash('echo two > state.txt')}`)
    const three = await session.send(`Word three. ${bash('echo three > state.txt')}`)
    const checkpoints = await session.checkpoints()
    expect(checkpoints.map((c) => c.task_id)).toEqual([one.task_id, two.task_id, three.task_id])
    expect(checkpoints[0]!.bytes).toBeGreaterThan(0)

    const fork = await session.fork({ atTaskId: one.task_id })
    expect(await state(fork)).toEqual({ file: 'one', memory: expect.stringContaining('were: Word one.') })
    const rewound = await session.rewind(two.task_id)
    expect(rewound).toMatchObject({ id: session.workspaceId, agent: null })
    expect((await berth.tasks.get({ params: { id: three.task_id } })).rewound_at).toEqual(expect.any(String))
    const now = await state(session)
    expect(now).toEqual({ file: 'two', memory: expect.stringContaining('were: Word one. | Word two.') })
    expect(now.memory).not.toContain('three')
    expect((await session.checkpoints()).map((c) => c.task_id).slice(0, 2)).toEqual([one.task_id, two.task_id])
    await fork.close({ deleteWorkspace: true })
    await session.close({ deleteWorkspace: true })
  }, 180_000)

  it('session.agent() shows the server its agent left running; session.stop() ends both, and the next send resumes the conversation', async () => {
    const session = berth.sessions.start({ profile_id: t.profileId })
    await expect(session.stop()).rejects.toThrow('Nothing to stop yet: send a prompt first')
    const port = serverPort()
    const first = await session.send(backgroundServerPrompt(port))
    expect(first.status, JSON.stringify(first.error)).toBe('completed')
    const agent = await vi.waitFor(
      async () => {
        const a = await session.agent()
        expect(a?.background.map((b) => b.description)).toEqual([expect.stringContaining(`listen(${port})`)])
        return a!
      },
      { timeout: 60_000, interval: 250 },
    )
    expect(agent).toMatchObject({ tasks: 1, background: [{ kind: 'local_bash' }] })
    expect(Date.parse(agent.background[0]!.since)).toBeGreaterThanOrEqual(Date.parse(agent.since))

    const stopped = await session.stop()
    expect(stopped).toMatchObject({ id: session.workspaceId, status: 'idle', container_id: null, agent: null })
    expect(await session.agent()).toBeNull()
    const probe = `node -e "require('http').get('http://127.0.0.1:${port}',r=>r.pipe(process.stdout)).on('error',e=>console.log('stopped:'+e.code))"`
    const next = await session.send(
      `Still serving? [[berth:tool Bash ${JSON.stringify({ command: probe })}]] [[berth:recall]]`,
    )
    expect(next.status, JSON.stringify(next.error)).toBe('completed')
    const outputs = (await t.events(next.task_id)).flatMap((e) => (e.type === 'tool_result' ? [String(e.output)] : []))
    expect(outputs.map((o) => o.trim())).toEqual(['stopped:ECONNREFUSED'])
    expect(next.result!.text).toContain('The first prompt was: Start the server, then check it.')
    await session.close({ deleteWorkspace: true })
  }, 180_000)
})
