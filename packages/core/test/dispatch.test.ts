/** The dispatcher between instances on one memory hub: placement, the shared and per-instance queues, cross-instance cancel. */
import { afterEach, describe, expect, it, vi } from 'vitest'
import { memoryCoordination } from '../src/coordination/memory.js'
import { memoryHub, type MemoryHub } from '../src/coordination/memory-hub.js'
import type { Coordination } from '../src/coordination/port.js'
import { ConcurrencySlots } from '../src/limits/concurrency.js'
import type { ContainerRuntime } from '../src/ports/container-runtime.js'
import { OwnedCollection } from '../src/records/collection.js'
import type { ContainerPool } from '../src/runtime/pool.js'
import { Dispatcher, instanceQueue, SHARED_QUEUE } from '../src/tasks/dispatch.js'
import type { TaskEngine } from '../src/tasks/engine.js'
import { EventBus } from '../src/tasks/event-bus.js'
import { lostClaimKey } from '../src/tasks/lost-instances.js'
import type { TaskRecord } from '../src/tasks/task.js'
import { Scheduler } from '../src/tasks/scheduler.js'
import type { WorkspaceRecord } from '../src/workspaces/workspaces.js'
import { countingStore, quietLogger, taskRecord } from './task-fakes.js'

/** An engine whose pool holds `max` containers; nothing else of it is used by the dispatcher. */
const engineOf = (max: number): TaskEngine => ({
  runtime: {} as ContainerRuntime,
  pool: { stats: () => ({ min: 0, max, in_use: 0, idle: 0 }) } as unknown as ContainerPool,
  command: ['berth-runner'],
})

const workspace = (fields: Partial<WorkspaceRecord> = {}) =>
  ({ id: 'ws_1', container_id: null, instance_id: null, ...fields }) as WorkspaceRecord

const opened: { dispatch: Dispatcher; coordination: Coordination; slots: ConcurrencySlots }[] = []

/** One instance: its coordination on `hub`, its scheduler (not serving: taken tasks stay queued, visible), its dispatcher. */
function instance(hub: MemoryHub, id: string, records: OwnedCollection<TaskRecord>, max: number) {
  const coordination = memoryCoordination({ hub, instanceId: id })
  const slots = new ConcurrencySlots(5, { slots: coordination.slots })
  const scheduler = new Scheduler({ slots, logger: quietLogger })
  const lost = { takeOver: vi.fn(async (_t: TaskRecord) => {}) }
  const cancels = { here: vi.fn(async (_t: TaskRecord) => true) }
  const steer = { here: vi.fn(async (_t: TaskRecord) => true) }
  const dispatch = new Dispatcher({
    coordination,
    records,
    slots,
    scheduler,
    bus: new EventBus(),
    logger: quietLogger,
    engine: engineOf(max),
    lost,
    cancels,
    steer,
    pollMs: 500,
  })
  opened.push({ dispatch, coordination, slots })
  return { coordination, scheduler, dispatch, lost, cancels }
}

function cluster() {
  const hub = memoryHub()
  const records = new OwnedCollection<TaskRecord>(countingStore(), 'tasks', 'task')
  return { hub, records }
}

afterEach(async () => {
  for (const { dispatch, coordination, slots } of opened.splice(0)) {
    dispatch.close()
    slots.close()
    await coordination.close().catch(() => {})
  }
  vi.useRealTimers()
})

describe('Dispatcher placement', () => {
  it('runs here when alone or with room, on the instance holding a session’s container, else on the shared queue', async () => {
    const { hub, records } = cluster()
    const a = instance(hub, 'A', records, 0)
    // Alone: here, room or not.
    expect(await a.dispatch.placement(workspace())).toBe('here')
    const b = instance(hub, 'B', records, 2)
    expect(await a.dispatch.placement(workspace())).toBe(SHARED_QUEUE)
    expect(await b.dispatch.placement(workspace())).toBe('here')
    // A follow-up goes where its container is.
    expect(await b.dispatch.placement(workspace({ container_id: 'c1', instance_id: 'A' }))).toBe(instanceQueue('A'))
    expect(await a.dispatch.placement(workspace({ container_id: 'c1', instance_id: 'A' }))).toBe('here')
    // Its instance gone: placed like a new workspace.
    await a.coordination.close()
    expect(await b.dispatch.placement(workspace({ container_id: 'c1', instance_id: 'A' }))).toBe('here')
  })
})

describe('Dispatcher queues', () => {
  it('a task on the shared queue is taken by the instance with room, which records itself on it', async () => {
    vi.useFakeTimers()
    const { hub, records } = cluster()
    const a = instance(hub, 'A', records, 0)
    const b = instance(hub, 'B', records, 2)
    const t = await records.put(taskRecord())
    await a.dispatch.send(SHARED_QUEUE, t)
    await a.dispatch.start()
    await b.dispatch.start()
    await vi.advanceTimersByTimeAsync(500)
    expect(b.scheduler.has(t.id)).toBe(true)
    expect(a.scheduler.has(t.id)).toBe(false)
    expect((await records.get(t.owner_id, t.id)).instance_id).toBe('B')
  })

  it('a follow-up sent to an instance’s own queue is taken there even without room', async () => {
    vi.useFakeTimers()
    const { hub, records } = cluster()
    const a = instance(hub, 'A', records, 2)
    const b = instance(hub, 'B', records, 0)
    await b.dispatch.start()
    const t = await records.put(taskRecord())
    await a.dispatch.send(instanceQueue('B'), t)
    await vi.advanceTimersByTimeAsync(500)
    expect(b.scheduler.has(t.id)).toBe(true)
  })

  it('cancel takes a task out of the shared queue before anyone takes it', async () => {
    vi.useFakeTimers()
    const { hub, records } = cluster()
    const a = instance(hub, 'A', records, 0)
    const b = instance(hub, 'B', records, 0)
    const t = await records.put(taskRecord())
    await a.dispatch.send(SHARED_QUEUE, t)
    expect(await a.dispatch.cancel(t)).toBe(true)
    expect(await a.dispatch.cancel(t)).toBe(false)
    // B gets room: nothing is left to take.
    const c = instance(hub, 'C', records, 2)
    await c.dispatch.start()
    await vi.advanceTimersByTimeAsync(1_000)
    expect(c.scheduler.has(t.id) || b.scheduler.has(t.id)).toBe(false)
  })

  it('a cancel requested on one instance reaches the instance holding the task, and only it', async () => {
    vi.useFakeTimers()
    const { hub, records } = cluster()
    const a = instance(hub, 'A', records, 0)
    const b = instance(hub, 'B', records, 2)
    await a.dispatch.start()
    await b.dispatch.start()
    const t = await records.put(taskRecord())
    await a.dispatch.send(SHARED_QUEUE, t)
    await vi.advanceTimersByTimeAsync(500)
    expect(b.scheduler.has(t.id)).toBe(true)
    await a.dispatch.requestCancel(t)
    await vi.waitFor(() => expect(b.cancels.here).toHaveBeenCalledOnce())
    expect(b.cancels.here.mock.calls[0]![0]).toMatchObject({ id: t.id, instance_id: 'B' })
    expect(a.cancels.here).not.toHaveBeenCalled()
  })

  it('a task fenced out of the instance that took it, and put back, runs there when taken again, each time', async () => {
    vi.useFakeTimers()
    const { hub, records } = cluster()
    const b = instance(hub, 'B', records, 2)
    await b.dispatch.start()
    const t = await records.put(taskRecord())
    await b.dispatch.send(SHARED_QUEUE, t)
    await vi.advanceTimersByTimeAsync(500)
    expect(b.scheduler.has(t.id)).toBe(true)
    // The lease lapsed and Redis came back empty: the scheduler's queue is emptied, the job is
    // gone, and the takeover puts the task back, untaken.
    // Twice: each taking is claimed for its takeover once, the second as well as the first.
    for (let round = 0; round < 2; round++) {
      expect(b.scheduler.fence(new Error('fenced')).map((x) => x.id)).toEqual([t.id])
      hub.queues.clear()
      const taken = await records.get(t.owner_id, t.id)
      expect(await b.coordination.once.claimOnce(lostClaimKey(taken), 60_000), `round ${round}`).toBe(true)
      await records.put({ ...taken, instance_id: null })
      await b.coordination
        .queue(SHARED_QUEUE)
        .add({ id: t.id, owner: t.owner_id, priority: t.priority, payload: { owner: t.owner_id } })
      await vi.advanceTimersByTimeAsync(500)
      expect(b.scheduler.has(t.id), `round ${round}`).toBe(true)
      expect((await records.get(t.owner_id, t.id)).instance_id).toBe('B')
    }
  })

  it('a redelivered job whose task ran on a lost instance is handed to the lost-instance takeover', async () => {
    vi.useFakeTimers()
    const { hub, records } = cluster()
    const b = instance(hub, 'B', records, 2)
    const t = await records.put(taskRecord({ status: 'running', instance_id: 'gone' }))
    await b.coordination
      .queue(SHARED_QUEUE)
      .add({ id: t.id, owner: t.owner_id, priority: t.priority, payload: { owner: t.owner_id } })
    await b.dispatch.start()
    await vi.advanceTimersByTimeAsync(500)
    expect(b.lost.takeOver).toHaveBeenCalledWith(expect.objectContaining({ id: t.id }))
    expect(b.scheduler.has(t.id)).toBe(false)
  })
})
