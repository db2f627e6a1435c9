/** The task state machine: its table, and one write and one publish per move, ended tasks staying ended. */
import { describe, expect, it } from 'vitest'
import { manualClock } from '../src/ports/clock.js'
import { OwnedCollection } from '../src/records/collection.js'
import type { TaskStatus } from '@berth/contract'
import { EventBus, type TaskBusMessage } from '../src/tasks/event-bus.js'
import { activeKey, canMove, isEnded, TaskStates, TRANSITIONS, type TaskRecord } from '../src/tasks/task.js'
import { Transcript } from '../src/tasks/transcript.js'
import { EventLog } from '../src/workspaces/event-log.js'
import { countingStore, taskRecord } from './task-fakes.js'

function machine() {
  const store = countingStore()
  const clock = manualClock(Date.UTC(2026, 0, 2))
  const bus = new EventBus()
  const eventLog = new EventLog(store, clock)
  const events = new Transcript(eventLog, bus)
  const records = new OwnedCollection<TaskRecord>(store, 'tasks', 'task')
  const states = new TaskStates({ records, store, clock, bus, eventLog, events })
  const published: TaskBusMessage[] = []
  bus.subscribeAll((m) => published.push(m))
  return { store, clock, bus, events, records, states, published }
}

/** A task stored as submit stores it, then the store's counters zeroed. */
async function stored(m: ReturnType<typeof machine>, fields: Partial<TaskRecord> = {}): Promise<TaskRecord> {
  const t = taskRecord(fields)
  await m.records.put(t)
  await m.store.set(activeKey(t.id), { owner: t.owner_id })
  m.store.reads.clear()
  m.store.writes.clear()
  return t
}

describe('the task transition table', () => {
  it('allows queued → starting → running → an end, and a queued or starting task to end directly', () => {
    expect(canMove('queued', 'starting')).toBe(true)
    expect(canMove('starting', 'running')).toBe(true)
    for (const end of ['completed', 'failed', 'cancelled'] as const) expect(canMove('running', end)).toBe(true)
    expect(canMove('queued', 'cancelled')).toBe(true)
    expect(canMove('queued', 'failed')).toBe(true)
    expect(canMove('starting', 'failed')).toBe(true)
  })

  it('refuses skipping ahead, going back, completing what never ran, and any move out of an end', () => {
    expect(canMove('queued', 'running')).toBe(false)
    expect(canMove('running', 'starting')).toBe(false)
    expect(canMove('running', 'queued')).toBe(false)
    expect(canMove('queued', 'completed')).toBe(false)
    for (const end of ['completed', 'failed', 'cancelled'] as const) {
      expect(isEnded(end)).toBe(true)
      for (const to of Object.keys(TRANSITIONS) as TaskStatus[]) expect(canMove(end, to)).toBe(false)
    }
    expect(isEnded('running')).toBe(false)
  })
})

describe('TaskStates', () => {
  it('opens a new task: stored once, listed as active for recovery, queued published once', async () => {
    const m = machine()
    const t = taskRecord()
    await m.states.open(t)
    expect(m.store.writes.get('tasks')).toBe(1)
    expect(await m.store.get(activeKey(t.id))).toEqual({ owner: t.owner_id })
    expect(m.published.map((p) => p.type === 'task.status' && p.status)).toEqual(['queued'])
    expect(await m.records.get(t.owner_id, t.id)).toEqual(t)
  })

  it('writes each move once and publishes it once, without reading the record on the way', async () => {
    const m = machine()
    let t = await stored(m)
    t = await m.states.move(t, 'starting')
    t = await m.states.move(t, 'running', { started_at: '2026-01-02T00:00:00.000Z' })
    expect(m.store.writes.get('tasks')).toBe(2)
    expect(m.store.reads.get('tasks') ?? 0).toBe(0)
    expect(m.published.map((p) => p.type === 'task.status' && p.status)).toEqual(['starting', 'running'])
    const last = m.published[1]!
    expect(last.type === 'task.status' && last.task.started_at).toBe('2026-01-02T00:00:00.000Z')
    expect((await m.records.get(t.owner_id, t.id)).status).toBe('running')
  })

  it('refuses a move the table does not allow: nothing written, nothing published', async () => {
    const m = machine()
    const t = await stored(m)
    const same = await m.states.move(t, 'running')
    expect(same).toEqual(t)
    expect(m.store.writes.get('tasks') ?? 0).toBe(0)
    expect(m.published).toEqual([])
  })

  it('ends a task once: result, event count and finish time stored in one write, one publish, no longer listed as active', async () => {
    const m = machine()
    let t = await stored(m, { status: 'running' })
    await m.events.record(t, [
      { type: 'token', text: 'Hi' },
      { type: 'token', text: '!' },
    ])
    m.published.length = 0
    m.store.writes.clear()
    t = await m.states.finish(t, {
      status: 'completed',
      result: { text: 'Hi!', tool_calls: [], input_tokens: 1, output_tokens: 2, cost_usd: 0, turns: 1 },
    })
    expect(m.store.writes.get('tasks')).toBe(1)
    expect(m.published).toHaveLength(1)
    expect(t).toMatchObject({
      status: 'completed',
      event_count: 2,
      first_seq: 1,
      finished_at: '2026-01-02T00:00:00.000Z',
    })
    expect(await m.store.get(activeKey(t.id))).toBeNull()
  })

  it('leaves a task another instance already ended as it is (read once, when ending)', async () => {
    const m = machine()
    const mine = await stored(m, { status: 'running' })
    // A survivor that took this instance for lost ended it meanwhile.
    const theirs = { ...mine, status: 'failed' as const, error: { code: 'CONTAINER_FAILED' as const, error: 'lost' } }
    await m.records.put(theirs)
    m.store.writes.clear()
    const done = await m.states.finish(mine, { status: 'completed' })
    expect(done).toEqual(theirs)
    expect(m.store.writes.get('tasks') ?? 0).toBe(0)
    expect(m.published).toEqual([])
    expect(m.store.reads.get('tasks')).toBe(1)
  })

  it('cancels a queued task directly', async () => {
    const m = machine()
    const t = await m.states.finish(await stored(m), { status: 'cancelled' })
    expect(t.status).toBe('cancelled')
    expect(m.published.map((p) => p.type === 'task.status' && p.status)).toEqual(['cancelled'])
  })
})
