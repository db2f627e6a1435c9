/** Fencing: a lost lease stops every task here; its return hands each dropped task to the takeover, retrying until it is taken. */
import { afterEach, expect, it, vi } from 'vitest'
import type { Coordination, CoordinationChange } from '../src/coordination/port.js'
import { ConcurrencySlots } from '../src/limits/concurrency.js'
import { OwnedCollection } from '../src/records/collection.js'
import { Fencing } from '../src/tasks/fencing.js'
import { Scheduler } from '../src/tasks/scheduler.js'
import type { TaskRecord } from '../src/tasks/task.js'
import { countingStore, quietLogger, taskRecord } from './task-fakes.js'

/** A coordination whose lease the test turns off and on; nothing else of it is used by fencing. */
function leaseSwitch() {
  let leased = true
  const handlers = new Set<(c: CoordinationChange) => void>()
  const coordination = {
    state: () => ({ reachable: leased, leased, since: 0 }),
    onStateChange(h: (c: CoordinationChange) => void) {
      handlers.add(h)
      return () => handlers.delete(h)
    },
  } as unknown as Coordination
  const set = (on: boolean) => {
    leased = on
    for (const h of handlers) h({ reachable: on, leased: on, since: 0, reset: on })
  }
  return { coordination, set }
}

const closers: (() => void)[] = []
afterEach(() => {
  for (const c of closers.splice(0)) c()
  vi.useRealTimers()
})

it('a task whose hand-over fails when the lease returns is handed over again, without another lease change', async () => {
  vi.useFakeTimers()
  const { coordination, set } = leaseSwitch()
  const records = new OwnedCollection<TaskRecord>(countingStore(), 'tasks', 'task')
  const slots = new ConcurrencySlots(5)
  const scheduler = new Scheduler({ slots, logger: quietLogger })
  const t = await records.put(taskRecord({ instance_id: 'A' }))
  scheduler.enqueue(t)
  // The first takeover fails (the backend only just back), the next ones succeed.
  const takeOver = vi
    .fn<(task: TaskRecord) => Promise<void>>()
    .mockRejectedValueOnce(new Error('LOADING Redis is loading the dataset in memory'))
    .mockResolvedValue(undefined)
  const resumed = vi.fn()
  const fencing = new Fencing({ coordination, scheduler, records, lost: { takeOver }, logger: quietLogger, resumed })
  closers.push(
    () => fencing.close(),
    () => slots.close(),
  )

  set(false)
  expect(scheduler.has(t.id)).toBe(false)
  expect(takeOver).not.toHaveBeenCalled()
  set(true)
  expect(resumed).toHaveBeenCalledOnce()
  await vi.advanceTimersByTimeAsync(0)
  expect(takeOver).toHaveBeenCalledOnce()
  await vi.advanceTimersByTimeAsync(1_000)
  expect(takeOver).toHaveBeenCalledTimes(2)
  expect(takeOver.mock.calls[1]![0]).toMatchObject({ id: t.id, instance_id: 'A' })
  // Handed over: nothing is tried again.
  await vi.advanceTimersByTimeAsync(5_000)
  expect(takeOver).toHaveBeenCalledTimes(2)
})

it('a task that ended meanwhile, or that another instance took, is not handed over', async () => {
  const { coordination, set } = leaseSwitch()
  const records = new OwnedCollection<TaskRecord>(countingStore(), 'tasks', 'task')
  const slots = new ConcurrencySlots(5)
  const scheduler = new Scheduler({ slots, logger: quietLogger })
  const ended = await records.put(taskRecord({ id: 'task_ended', instance_id: 'A' }))
  const moved = await records.put(taskRecord({ id: 'task_moved', instance_id: 'A' }))
  scheduler.enqueue(ended)
  scheduler.enqueue(moved)
  const takeOver = vi.fn(async (_t: TaskRecord) => {})
  const fencing = new Fencing({
    coordination,
    scheduler,
    records,
    lost: { takeOver },
    logger: quietLogger,
    resumed: () => {},
  })
  closers.push(
    () => fencing.close(),
    () => slots.close(),
  )
  set(false)
  await records.put({ ...ended, status: 'completed' })
  await records.put({ ...moved, instance_id: 'B' })
  set(true)
  await new Promise((r) => setTimeout(r, 20))
  expect(takeOver).not.toHaveBeenCalled()
})
