import { createStorage } from 'unstorage'
import * as v from 'valibot'
import { describe, expect, it } from 'vitest'
import { createAesGcmCipher, createServices, createTaskSocket, type Caller, type TaskRecord } from '@berth/core'
import { type ClientMessage, SLOW_CONSUMER_CLOSE, ServerMessage } from '@berth/contract'
import { unstorageStore } from '../../server/src/store.js'

describe('task socket', () => {
  const services = createServices({
    store: unstorageStore(createStorage()),
    cipher: createAesGcmCipher(new Uint8Array(32)),
  })
  const caller: Caller = { id: 'usr_socket', role: 'user' }

  it('closes a client that lets too much queue up, instead of buffering without end', async () => {
    let buffered = 0
    const sent: object[] = []
    const closed: [number, string][] = []
    const session = createTaskSocket({
      caller,
      services,
      maxBuffered: 1000,
      send: (m) => sent.push(m),
      buffered: () => buffered,
      close: (code, reason) => closed.push([code, reason]),
    })
    await session.message(JSON.stringify({ type: 'ping' }))
    expect(sent).toEqual([{ type: 'pong' }])
    buffered = 5000
    await session.message(JSON.stringify({ type: 'ping' }))
    expect(closed).toEqual([[SLOW_CONSUMER_CLOSE, expect.stringContaining('slow consumer')]])
    expect(sent).toHaveLength(1)
    // Nothing more is sent once closed.
    buffered = 0
    await session.message(JSON.stringify({ type: 'ping' }))
    expect(sent).toHaveLength(1)
  })

  it("sends only messages of the contract's ServerMessage, as JSON reads them", async () => {
    const now = new Date().toISOString()
    const task: TaskRecord = {
      id: 'task_socketcontract1',
      owner_id: caller.id,
      created_at: now,
      updated_at: now,
      mode: 'batch',
      profile_id: 'prof_socketcontract1',
      prompt: 'hello',
      priority: 'normal',
      workspace_id: 'ws_socketcontract1',
      session_id: 'sess-1',
      allowed_tools: null,
      max_turns: null,
      max_budget_usd: null,
      status: 'running',
      started_at: now,
      finished_at: null,
      result: null,
      error: null,
    }
    await services.tasks.records.put(task)
    await services.eventLog.append(caller.id, task.workspace_id, [
      { type: 'user_message', task_id: task.id, text: 'hello' },
      { type: 'turn_start', task_id: task.id, turn: 1 },
    ])
    const sent: unknown[] = []
    const session = createTaskSocket({
      caller,
      services,
      send: (m) => sent.push(JSON.parse(JSON.stringify(m))),
      buffered: () => 0,
      close: () => {},
    })

    const client: ClientMessage[] = [
      { type: 'ping' },
      { type: 'subscribe', task_id: task.id },
      { type: 'subscribe', task_id: 'task_nosuchtask' },
      { type: 'unsubscribe', task_id: task.id },
    ]
    for (const m of client) await session.message(JSON.stringify(m))
    // A submit whose task is malformed, and a message of no known type.
    await session.message(JSON.stringify({ type: 'submit', request_id: 'r1', task: { mode: 'batch', prompt: 7 } }))
    await session.message(JSON.stringify({ type: 'launch' }))
    session.close()

    for (const m of sent) {
      const parsed = v.safeParse(ServerMessage, m)
      expect(parsed.success ? [] : v.flatten(parsed.issues), JSON.stringify(m)).toEqual([])
    }
    const types = sent.map((m) => (m as { type: string }).type)
    expect(types).toEqual(['pong', 'task.status', 'task.event', 'task.event', 'error', 'error', 'error'])
    const [, status, first] = sent as [
      unknown,
      { task: { task_id: string; status: string } },
      { event: { type: string; seq: number } },
    ]
    expect(status.task).toMatchObject({ task_id: task.id, status: 'running' })
    expect(first.event).toMatchObject({ type: 'user_message', seq: 1 })
    // Errors carry the id of the message they answer; a bad task is reported under `task.`.
    const errors = sent.filter(
      (
        m,
      ): m is {
        type: 'error'
        code: string
        task_id?: string
        request_id?: string
        details?: { issues: { path: string }[] }
      } => (m as { type: string }).type === 'error',
    )
    expect(errors[0]).toMatchObject({ code: 'NOT_FOUND', task_id: 'task_nosuchtask' })
    expect(errors[1]).toMatchObject({
      code: 'VALIDATION_FAILED',
      request_id: 'r1',
      error: expect.stringMatching(/^Invalid task: /),
    })
    expect(errors[1]!.details!.issues.map((i) => i.path)).toContain('task.prompt')
    expect(errors[1]!.details!.issues.every((i) => i.path.startsWith('task'))).toBe(true)
    expect(errors[2]).toMatchObject({ code: 'VALIDATION_FAILED', error: 'Unknown or malformed message' })
  })
})
