/**
 * Steering from the caller's SDK against a real server running real tasks in containers on
 * Docker and Podman (the runner and the offline model inside): permission requests decided
 * from `run()`'s callback over the WebSocket and from a stream over HTTP, a message to the
 * running agent, and an interrupt mid-tool.
 */
import { ensureEngines } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BerthError, createBerthClient, type NodeBerthClient, type TaskEvent } from '@berth/client/node'
import { ENGINES, sweep } from '../../server/test/pool.helpers.js'
import setupRunner from '../../server/test/runner.global-setup.js'
import { agentUser, taskServer } from '../../server/test/tasks.helpers.js'

const TOUCH = '[[berth:tool Bash {"command":"touch /workspace/marker"}]]'
// Not a bare `sleep N`: Claude Code refuses those and asks for a background task.
const SLEEP = '[[berth:tool Bash {"command":"echo start; sleep 29.9; echo slept"}]]'
const WORK = '[[berth:tool Bash {"command":"echo start; sleep 4; echo done"}]]'
const ofType = <T extends TaskEvent['type']>(events: TaskEvent[], type: T) =>
  events.filter((e): e is Extract<TaskEvent, { type: T }> => e.type === type)

/** The rejection of a call, asserted to be a BerthError. */
async function failure(promise: Promise<unknown>): Promise<BerthError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(BerthError)
  return err as BerthError
}

beforeAll(async () => {
  ensureEngines(['podman', 'docker'])
  await setupRunner()
})

describe.each(ENGINES)('@berth/client steering tasks on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let berth: NodeBerthClient
  beforeAll(async () => {
    t = await taskServer(engine)
    berth = createBerthClient({ baseURL: t.s.url, token: t.token })
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it("run(): onPermissionRequest sends a message and denies the first call, allows the second, over the WebSocket; a second decision is 409, another caller's 404", async () => {
    const seen: string[] = []
    const events: TaskEvent[] = []
    const task = await berth.tasks.run(
      {
        profile_id: t.profileId,
        prompt: `Mark it. ${TOUCH} ${TOUCH} [[berth:text Marked.]]`,
        require_approval: ['Bash'],
      },
      {
        onEvent: (e) => events.push(e),
        onPermissionRequest: async (request, controls) => {
          seen.push(request.request_id)
          if (seen.length > 1) return 'allow'
          // A message over the same socket, handed to the agent at its next turn boundary.
          await controls.send('The second try is fine')
          return { decision: 'deny', message: 'not the first time' }
        },
      },
    )
    expect(task.status).toBe('completed')
    expect(seen).toHaveLength(2)
    const requests = ofType(events, 'permission_request')
    expect(requests.map((r) => r.request_id)).toEqual(seen)
    expect(requests[0]).toMatchObject({ tool: 'Bash', input: { command: 'touch /workspace/marker' } })
    expect(ofType(events, 'permission_decision')).toEqual([
      expect.objectContaining({ request_id: seen[0], decision: 'deny', message: 'not the first time', by: 'caller' }),
      expect.objectContaining({ request_id: seen[1], decision: 'allow', by: 'caller' }),
    ])
    // The denied call did not run and the agent was told why; the allowed one ran.
    const results = ofType(events, 'tool_result')
    expect(results[0]).toMatchObject({ is_error: true, output: expect.stringContaining('not the first time') })
    expect(results[1]).toMatchObject({ is_error: false })
    expect(task.pending_approvals).toBe(0)
    expect(ofType(events, 'user_message').map((m) => m.text)).toContain('The second try is fine')

    const again = await failure(berth.tasks.approve(task.task_id, seen[0]!))
    expect(again).toMatchObject({ status: 409, code: 'CONFLICT' })
    const other = createBerthClient({ baseURL: t.s.url, token: (await agentUser(t.s)).token })
    const foreign = await failure(other.tasks.deny(task.task_id, seen[1]!, { message: 'mine?' }))
    expect(foreign).toMatchObject({ status: 404, code: 'NOT_FOUND' })
  })

  it('a request left alone is denied at its timeout; a decision sent after that reaches onDecisionError as CONFLICT', async () => {
    let expired: (() => void) | undefined
    const timedOut = new Promise<void>((resolve) => (expired = resolve))
    const errors: unknown[] = []
    const task = await berth.tasks.run(
      {
        profile_id: t.profileId,
        prompt: `Mark. ${TOUCH} [[berth:echo_last_result]]`,
        require_approval: ['Bash'],
        approval_timeout_s: 1,
      },
      {
        onEvent: (e) => {
          if (e.type === 'permission_decision' && e.by === 'timeout') expired?.()
        },
        // Too late on purpose: the answer comes once the timeout has denied the request.
        onPermissionRequest: async () => {
          await timedOut
          return { decision: 'allow' }
        },
        onDecisionError: (err) => errors.push(err),
      },
    )
    expect(task.status).toBe('completed')
    expect(task.result?.tool_calls).toHaveLength(1)
    await expect.poll(() => errors.length).toBe(1)
    expect(errors[0]).toMatchObject({ code: 'CONFLICT', status: 409 })
  })

  it('stream over HTTP: a message sent while a tool runs reaches the agent; the open request is listed and approve lets the tool run', async () => {
    const http = createBerthClient({ baseURL: t.s.url, token: t.token, websocket: false })
    const { task_id } = await http.tasks.submit({
      body: {
        mode: 'batch',
        profile_id: t.profileId,
        prompt: `Check. ${TOUCH} ${WORK} [[berth:reply_last_user]]`,
        require_approval: ['Bash(touch:*)'],
      },
    })
    const stream = http.tasks.stream(task_id)
    const events: TaskEvent[] = []
    for await (const e of stream) {
      events.push(e)
      // The sleep needs no approval; the message is taken at the turn boundary after it, the
      // last one, where the model quotes the latest message a person typed.
      if (e.type === 'tool_call' && (e.input as { command?: string }).command?.includes('sleep 4'))
        await stream.send('Use the staging bucket')
      if (e.type !== 'permission_request') continue
      expect(e).toMatchObject({ tool: 'Bash', input: { command: 'touch /workspace/marker' } })
      const open = await http.tasks.approvals(task_id)
      expect(open).toEqual([
        expect.objectContaining({ request_id: e.request_id, tool: 'Bash', status: 'pending', task_id }),
      ])
      expect((await http.tasks.get({ params: { id: task_id } })).pending_approvals).toBe(1)
      await stream.approve(e.request_id, { message: 'fine' })
    }
    const task = await stream.finalTask()
    expect(task.status).toBe('completed')
    expect(ofType(events, 'permission_decision')).toEqual([
      expect.objectContaining({ decision: 'allow', message: 'fine', by: 'caller' }),
    ])
    expect(ofType(events, 'tool_result').map((r) => r.is_error)).toEqual([false, false])
    expect(ofType(events, 'user_message').map((m) => m.text)).toContain('Use the staging bucket')
    expect(task.result?.text).toContain('Last message: Use the staging bucket')
    expect(await http.tasks.approvals(task_id)).toEqual([])
    // A finished task takes no message.
    expect(await failure(http.tasks.send(task_id, 'too late'))).toMatchObject({ status: 409, code: 'CONFLICT' })
  })

  it('interrupt from run()’s controls stops a sleep mid-tool: cancelled with INTERRUPTED', async () => {
    let interrupted = false
    const task = await berth.tasks.run(
      { profile_id: t.profileId, prompt: `Wait. ${SLEEP} [[berth:text Slept.]]` },
      {
        onEvent: (e, controls) => {
          if (e.type !== 'tool_call' || interrupted) return
          interrupted = true
          void controls.interrupt()
        },
      },
    )
    expect(interrupted).toBe(true)
    expect(task).toMatchObject({ status: 'cancelled', error: { code: 'INTERRUPTED' } })
    // The partial result of the turn it stopped, and not the answer after the sleep.
    expect(task.result?.text).not.toContain('Slept.')
    // Interrupting a finished task changes nothing; the route's own form works too.
    expect(await berth.tasks.interrupt(task.task_id)).toMatchObject({ status: 'cancelled' })
    expect(await berth.tasks.interrupt({ params: { id: task.task_id } })).toMatchObject({ status: 'cancelled' })
    expect(await berth.tasks.approvals.list({ params: { id: task.task_id } })).toEqual({
      approvals: [],
      total: 0,
      next_cursor: null,
    })
  })
  it('a session prompt interrupted mid-tool leaves the conversation going: the follow-up, with its own approval callback, recalls it', async () => {
    const session = berth.sessions.start({ profile_id: t.profileId })
    try {
      const stopped = await session.send(`The password is OSPREY. ${SLEEP}`, {
        onEvent: (e, controls) => {
          if (e.type === 'tool_call') void controls.interrupt()
        },
      })
      expect(stopped).toMatchObject({ status: 'cancelled', error: { code: 'INTERRUPTED' } })
      const asked: string[] = []
      const next = await session.send(`What did I say first? ${TOUCH} [[berth:recall]]`, {
        require_approval: ['Bash'],
        onPermissionRequest: (request) => {
          asked.push(request.tool)
          return { decision: 'deny', message: 'no need' }
        },
      })
      expect(asked).toEqual(['Bash'])
      expect(next.status).toBe('completed')
      expect(next.session_id).toBe(stopped.session_id)
      expect(next.result?.text).toContain('The password is OSPREY.')
    } finally {
      await session.close()
    }
  })
})
