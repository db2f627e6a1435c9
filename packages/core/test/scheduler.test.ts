/** The scheduler with a runner of plain objects: one task per workspace, the queue's order, slots, abort and close. */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { memoryCoordination } from '../src/coordination/memory.js'
import { memoryHub } from '../src/coordination/memory-hub.js'
import { ConcurrencySlots } from '../src/limits/concurrency.js'
import { TaskCancelled } from '../src/tasks/cancel.js'
import type { TaskRecord } from '../src/tasks/task.js'
import { Scheduler, type TaskRunner } from '../src/tasks/scheduler.js'
import { quietLogger, taskRecord } from './task-fakes.js'

/** A runner whose runs end when the test says so (or when their signal aborts). */
function fakeRunner() {
  const started: string[] = []
  const signals = new Map<string, AbortSignal>()
  const finish = new Map<string, () => void>()
  const makeRoom = vi.fn((_profile: string, _owner: string) => false)
  const runner: TaskRunner = {
    run(task: TaskRecord, signal: AbortSignal) {
      started.push(task.id)
      signals.set(task.id, signal)
      return new Promise<void>((resolve) => {
        finish.set(task.id, resolve)
        signal.addEventListener('abort', () => resolve(), { once: true })
      })
    },
    makeRoom,
  }
  return { runner, started, signals, finish, makeRoom }
}

function setup(limit = 5) {
  const slots = new ConcurrencySlots(limit)
  const scheduler = new Scheduler({ slots, logger: quietLogger })
  const fake = fakeRunner()
  scheduler.serve(fake.runner)
  return { slots, scheduler, ...fake }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('Scheduler', () => {
  it('starts nothing before it serves a runner, then everything that may start', async () => {
    const scheduler = new Scheduler({ slots: new ConcurrencySlots(5), logger: quietLogger })
    const fake = fakeRunner()
    const t = taskRecord()
    scheduler.enqueue(t)
    await Promise.resolve()
    expect(scheduler.isQueued(t.workspace_id)).toBe(true)
    scheduler.serve(fake.runner)
    await vi.waitFor(() => expect(fake.started).toEqual([t.id]))
    expect(() => scheduler.serve(fake.runner)).toThrow(/already serving/)
  })

  it('runs one task per workspace at a time; the next starts when the first ends', async () => {
    const { scheduler, started, finish } = setup()
    const a1 = taskRecord({ workspace_id: 'ws_a' })
    const a2 = taskRecord({ workspace_id: 'ws_a' })
    const b1 = taskRecord({ workspace_id: 'ws_b' })
    for (const t of [a1, a2, b1]) scheduler.enqueue(t)
    await vi.waitFor(() => expect(started).toEqual([a1.id, b1.id]))
    expect(scheduler.isBusy('ws_a')).toBe(true)
    expect(scheduler.isQueued('ws_a')).toBe(true)
    expect(scheduler.tasksOf('ws_a')).toEqual({ queued: [a2.id], running: [a1.id] })
    expect(scheduler.load).toBe(3)
    finish.get(a1.id)!()
    await vi.waitFor(() => expect(started).toEqual([a1.id, b1.id, a2.id]))
    expect(scheduler.has(a2.id)).toBe(true)
    finish.get(a2.id)!()
    finish.get(b1.id)!()
    await vi.waitFor(() => expect(scheduler.isWanted('ws_a') || scheduler.isWanted('ws_b')).toBe(false))
    expect(scheduler.load).toBe(0)
  })

  it('starts by priority, then the owner with fewer tasks running, then the oldest', async () => {
    const { scheduler, started, finish } = setup()
    // One workspace, so each start waits for the one before: the order is the queue's.
    const busy = taskRecord({ workspace_id: 'ws_x', owner_id: 'usr_a' })
    scheduler.enqueue(busy)
    await vi.waitFor(() => expect(started).toEqual([busy.id]))
    const low = taskRecord({ workspace_id: 'ws_x', priority: 'low' })
    const normalA = taskRecord({ workspace_id: 'ws_x', owner_id: 'usr_a' })
    const normalB = taskRecord({ workspace_id: 'ws_x', owner_id: 'usr_b' })
    const high = taskRecord({ workspace_id: 'ws_x', priority: 'high' })
    for (const t of [low, normalA, normalB, high]) scheduler.enqueue(t)
    // A task of usr_a runs elsewhere: usr_b's newer task goes before usr_a's.
    const elsewhere = taskRecord({ workspace_id: 'ws_y', owner_id: 'usr_a' })
    scheduler.enqueue(elsewhere)
    await vi.waitFor(() => expect(started).toContain(elsewhere.id))
    for (const next of [high, normalB, normalA, low]) {
      finish.get(started.at(-1) === elsewhere.id ? started.at(-2)! : started.at(-1)!)!()
      await vi.waitFor(() => expect(started).toContain(next.id))
    }
    expect(started.filter((id) => id !== elsewhere.id)).toEqual([busy.id, high.id, normalB.id, normalA.id, low.id])
  })

  it('holds a task queued without a slot until its profile has one, asking for room meanwhile', async () => {
    const { slots, scheduler, started, makeRoom } = setup(1)
    slots.acquire('prof_1', 'ws_held')
    const waiting = taskRecord({ workspace_id: 'ws_w', slot_pending: true })
    scheduler.enqueue(waiting)
    await vi.waitFor(() => expect(makeRoom).toHaveBeenCalledWith('prof_1', 'usr_a'))
    expect(started).toEqual([])
    expect(scheduler.isQueued('ws_w')).toBe(true)
    slots.release('prof_1', 'ws_held')
    scheduler.wake()
    await vi.waitFor(() => expect(started).toEqual([waiting.id]))
    expect(slots.has('prof_1', 'ws_w')).toBe(true)
  })

  it('asks shared slots again after a second when another instance holds the last one, asking for room meanwhile', async () => {
    vi.useFakeTimers()
    const hub = memoryHub()
    const coords = [memoryCoordination({ hub }), memoryCoordination({ hub })]
    const [other, slots] = coords.map((c) => new ConcurrencySlots(1, { slots: c.slots })) as [
      ConcurrencySlots,
      ConcurrencySlots,
    ]
    const scheduler = new Scheduler({ slots, logger: quietLogger })
    const fake = fakeRunner()
    scheduler.serve(fake.runner)
    await other.take('prof_1', 'ws_elsewhere')
    const waiting = taskRecord({ workspace_id: 'ws_w', slot_pending: true })
    scheduler.enqueue(waiting)
    await vi.advanceTimersByTimeAsync(10)
    // Refused: back in the queue, the workspace not held meanwhile, and an idle session that holds the slot asked to yield it.
    expect(fake.started).toEqual([])
    expect(scheduler.isQueued('ws_w')).toBe(true)
    expect(scheduler.isBusy('ws_w')).toBe(false)
    expect(fake.makeRoom).toHaveBeenCalledWith('prof_1', 'usr_a')
    other.release('prof_1', 'ws_elsewhere')
    await vi.advanceTimersByTimeAsync(500)
    expect(fake.started).toEqual([])
    await vi.advanceTimersByTimeAsync(600)
    expect(fake.started).toEqual([waiting.id])
    scheduler.close()
    for (const s of [other, slots]) s.close()
    for (const c of coords) await c.close()
  })

  it('takes a queued task out, and aborts a running one with its reason, waiting for its run to end', async () => {
    const { scheduler, started, signals } = setup()
    const run = taskRecord({ workspace_id: 'ws_a' })
    const queued = taskRecord({ workspace_id: 'ws_a' })
    scheduler.enqueue(run)
    scheduler.enqueue(queued)
    await vi.waitFor(() => expect(started).toEqual([run.id]))
    expect(scheduler.dequeue(queued.id)).toBe(true)
    expect(scheduler.dequeue(queued.id)).toBe(false)
    expect(await scheduler.abort(run.id, new TaskCancelled(run.id))).toBe(true)
    expect(signals.get(run.id)!.reason).toBeInstanceOf(TaskCancelled)
    expect(scheduler.has(run.id)).toBe(false)
    expect(await scheduler.abort(run.id)).toBe(false)
    await Promise.resolve()
    expect(started).toEqual([run.id])
  })

  it('starts nothing once closed; runs under way go on', async () => {
    const { scheduler, started, finish } = setup()
    const a = taskRecord()
    scheduler.enqueue(a)
    await vi.waitFor(() => expect(started).toEqual([a.id]))
    scheduler.close()
    expect(scheduler.closed).toBe(true)
    const b = taskRecord()
    scheduler.enqueue(b)
    finish.get(a.id)!()
    await vi.waitFor(() => expect(scheduler.isBusy(a.workspace_id)).toBe(false))
    expect(started).toEqual([a.id])
    expect(scheduler.isQueued(b.workspace_id)).toBe(true)
  })

  it('tells its listeners when it looks at the queue again', async () => {
    const { scheduler } = setup()
    const woke = vi.fn()
    scheduler.onWake(woke)
    // The wake of serve() first.
    await vi.waitFor(() => expect(woke).toHaveBeenCalledOnce())
    woke.mockClear()
    scheduler.wake()
    await vi.waitFor(() => expect(woke).toHaveBeenCalledOnce())
  })
})
