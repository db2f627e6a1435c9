/** Cancel: its own abort reason for a run here, a queued task ended directly, and the wait for a remote task's end on the bus. */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { ConcurrencySlots } from '../src/limits/concurrency.js'
import { manualClock } from '../src/ports/clock.js'
import { OwnedCollection } from '../src/records/collection.js'
import { LocalCancel, REMOTE_CANCEL_WAIT_MS, TaskCancelled } from '../src/tasks/cancel.js'
import { EventBus } from '../src/tasks/event-bus.js'
import { TaskStates, taskView, type TaskRecord } from '../src/tasks/task.js'
import { Scheduler } from '../src/tasks/scheduler.js'
import type { SessionContainers } from '../src/tasks/session-containers.js'
import { Transcript } from '../src/tasks/transcript.js'
import { EventLog } from '../src/workspaces/event-log.js'
import { countingStore, quietLogger, taskRecord } from './task-fakes.js'

function setup() {
  const store = countingStore()
  const clock = manualClock(Date.UTC(2026, 0, 2))
  const bus = new EventBus()
  const eventLog = new EventLog(store, clock)
  const records = new OwnedCollection<TaskRecord>(store, 'tasks', 'task')
  const states = new TaskStates({ records, store, clock, bus, eventLog, events: new Transcript(eventLog, bus) })
  const scheduler = new Scheduler({ slots: new ConcurrencySlots(5), logger: quietLogger })
  const containers = { releaseIfUnused: vi.fn(async () => {}) } as unknown as SessionContainers
  const cancels = new LocalCancel({ records, states, scheduler, containers, bus })
  return { store, bus, records, states, scheduler, containers, cancels }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('LocalCancel', () => {
  it('ends a task queued here as cancelled and releases its unused workspace', async () => {
    const { records, scheduler, containers, cancels } = setup()
    const t = await records.put(taskRecord())
    scheduler.enqueue(t)
    expect(await cancels.here(t)).toBe(true)
    expect((await records.get(t.owner_id, t.id)).status).toBe('cancelled')
    expect(scheduler.has(t.id)).toBe(false)
    expect(containers.releaseIfUnused).toHaveBeenCalledWith(t)
  })

  it('aborts a run here with TaskCancelled, and answers false for a task it does not hold', async () => {
    const { records, scheduler, cancels } = setup()
    const t = await records.put(taskRecord())
    let reason: unknown
    scheduler.serve({
      run: (_task, signal) =>
        new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => {
            reason = signal.reason
            resolve()
          }),
        ),
      makeRoom: () => false,
    })
    scheduler.enqueue(t)
    await vi.waitFor(() => expect(scheduler.isBusy(t.workspace_id)).toBe(true))
    expect(await cancels.here(t)).toBe(true)
    expect(reason).toBeInstanceOf(TaskCancelled)
    expect((reason as TaskCancelled).taskId).toBe(t.id)
    expect(await cancels.here(taskRecord())).toBe(false)
  })

  it('resolves a remote cancel with the ended task as its end arrives on the bus', async () => {
    vi.useFakeTimers()
    const { bus, records, cancels } = setup()
    const t = await records.put(taskRecord({ status: 'running', instance_id: 'other' }))
    const wait = cancels.endOf(t, REMOTE_CANCEL_WAIT_MS)
    let answer: unknown
    void wait.ended.then((a) => (answer = a))
    // Not an end: still waiting.
    bus.deliverRemote({
      type: 'task.status',
      task_id: t.id,
      status: 'running',
      task: taskView(t),
      owner_id: t.owner_id,
    })
    await vi.advanceTimersByTimeAsync(1_000)
    expect(answer).toBeUndefined()
    const ended = taskView({ ...t, status: 'cancelled' })
    bus.deliverRemote({ type: 'task.status', task_id: t.id, status: 'cancelled', task: ended, owner_id: t.owner_id })
    await vi.advanceTimersByTimeAsync(0)
    expect(answer).toEqual(ended)
  })

  it('answers the stored task when no end arrives within the bound', async () => {
    vi.useFakeTimers()
    const { records, cancels } = setup()
    const t = await records.put(taskRecord({ status: 'running', instance_id: 'other' }))
    let answer: unknown
    void cancels.endOf(t, REMOTE_CANCEL_WAIT_MS).ended.then((a) => (answer = a))
    await vi.advanceTimersByTimeAsync(REMOTE_CANCEL_WAIT_MS - 1)
    expect(answer).toBeUndefined()
    await vi.advanceTimersByTimeAsync(1)
    expect(answer).toEqual(taskView(t))
  })
})
