/**
 * Idle sessions yield to waiting work (issue 42), over fakes: the session idle the longest
 * that holds what a task waits for is released, one at a time; for room in the pool any
 * caller's session goes, again while a claim still waits; over two instances on one
 * coordination the longest idle of both is released, by the instance that holds it.
 */
import { afterEach, expect, it, vi } from 'vitest'
import { memoryCoordination } from '../src/coordination/memory.js'
import { memoryHub } from '../src/coordination/memory-hub.js'
import type { Coordination } from '../src/coordination/port.js'
import { noopMetrics } from '../src/ports/metrics.js'
import { EventBus } from '../src/tasks/event-bus.js'
import { IdleYield, type IdleYieldOptions } from '../src/tasks/idle-yield.js'
import type { IdleSession } from '../src/tasks/session-containers.js'
import { quietLogger } from './task-fakes.js'

const GIB = 1024 ** 3
const session = (workspace_id: string, idle_ms: number, extra: Partial<IdleSession> = {}): IdleSession => ({
  workspace_id,
  owner_id: 'usr_a',
  profile_id: 'prof_1',
  idle_ms,
  memory_bytes: 2 * GIB,
  ...extra,
})

/** Idle sessions a test lists; a release takes one out and settles when the test lets it. */
function fakeContainers(idle: IdleSession[]) {
  const released: string[] = []
  const settle = new Map<string, () => void>()
  return {
    released,
    settle: (ws: string) => settle.get(ws)!(),
    containers: {
      idleSessions: () => [...idle].sort((a, b) => b.idle_ms - a.idle_ms),
      living: { lives: () => false },
      yieldIdle(ws: string) {
        const i = idle.findIndex((s) => s.workspace_id === ws)
        if (i < 0) return null
        idle.splice(i, 1)
        released.push(ws)
        return new Promise<void>((r) => settle.set(ws, r))
      },
    },
  }
}

/** After every promise chain and microtask queued so far has run (the fakes and the memory pub/sub use no timers). */
const settled = () => new Promise((r) => setImmediate(r))

const opened: { room: IdleYield; coordination: Coordination }[] = []
afterEach(async () => {
  for (const { room, coordination } of opened.splice(0)) {
    await room.close()
    await coordination.close()
  }
})

function idleYield(
  containers: ReturnType<typeof fakeContainers>['containers'],
  extra: Partial<IdleYieldOptions> & { coordination?: Coordination } = {},
) {
  const coordination = extra.coordination ?? memoryCoordination()
  const room = new IdleYield({
    containers: containers as unknown as IdleYieldOptions['containers'],
    coordination,
    shared: false,
    engine: undefined,
    bus: new EventBus(),
    metrics: noopMetrics,
    logger: quietLogger,
    ...extra,
  })
  opened.push({ room, coordination })
  return room
}

it('a task waiting for a slot releases the longest-idle session of its profile, one at a time', async () => {
  const fake = fakeContainers([
    session('ws_new', 1_000),
    session('ws_old', 9_000),
    session('ws_other_profile', 99_000, { profile_id: 'prof_2' }),
  ])
  const room = idleYield(fake.containers)
  expect(room.forSlot('prof_1')).toBe(true)
  expect(fake.released).toEqual(['ws_old'])
  // Under way: asking again (the scheduler looks at its queue often) releases no second one.
  expect(room.forSlot('prof_1')).toBe(true)
  expect(fake.released).toEqual(['ws_old'])
  fake.settle('ws_old')
  await vi.waitFor(() => {
    room.forSlot('prof_1')
    expect(fake.released).toEqual(['ws_old', 'ws_new'])
  })
  // A caller's cap: only that caller's sessions count.
  expect(room.forCaller('usr_b')).toBe(false)
  expect(room.forCaller('usr_a')).toBe(true)
  expect(fake.released).toEqual(['ws_old', 'ws_new', 'ws_other_profile'])
})

it('a submit takes its own idle session, and none when every idle one is going already', async () => {
  const fake = fakeContainers([session('ws_1', 5_000), session('ws_2', 1_000)])
  const room = idleYield(fake.containers)
  expect(await room.forSubmit('prof_1')).toBe(true)
  expect(await room.forSubmit('prof_1')).toBe(true)
  expect(await room.forSubmit('prof_1')).toBe(false)
  expect(fake.released).toEqual(['ws_1', 'ws_2'])
})

it('claims waiting for room in the pool release the longest-idle session of any caller, one at a time while one waits', async () => {
  const fake = fakeContainers([
    session('ws_a', 3_000),
    session('ws_b', 7_000, { owner_id: 'usr_b', profile_id: 'prof_b' }),
    session('ws_c', 1_000),
  ])
  const pool = { waiting: 1, memoryBudget: null }
  const bus = new EventBus()
  const room = idleYield(fake.containers, { engine: { pool } as unknown as IdleYieldOptions['engine'], bus })
  expect(room.stats()).toEqual({ sessions: 3, memoryBytes: 6 * GIB, livingAgents: 0 })
  // A task's claim waits for memory (its waiting reason on the bus).
  bus.publish({
    type: 'task.status',
    task_id: 'task_1',
    status: 'queued',
    owner_id: 'usr_c',
    task: { waiting: { reason: 'memory', message: '' } } as never,
  })
  await vi.waitFor(() => expect(fake.released).toEqual(['ws_b']))
  room.forRoom()
  await settled()
  expect(fake.released).toEqual(['ws_b'])
  // Released, and the claim still does not fit: the next one goes.
  fake.settle('ws_b')
  await vi.waitFor(() => expect(fake.released).toEqual(['ws_b', 'ws_a']))
  // Now it fits: no more.
  pool.waiting = 0
  fake.settle('ws_a')
  await settled()
  room.forRoom()
  expect(fake.released).toEqual(['ws_b', 'ws_a'])
  expect(room.stats()).toEqual({ sessions: 1, memoryBytes: 2 * GIB, livingAgents: 0 })
})

it('over two instances, the session idle the longest on either is released by the instance that holds it', async () => {
  const hub = memoryHub()
  const here = fakeContainers([session('ws_here', 2_000)])
  const there = fakeContainers([
    session('ws_there', 8_000),
    session('ws_there_other', 50_000, { profile_id: 'prof_2' }),
  ])
  const a = idleYield(here.containers, { coordination: memoryCoordination({ hub, instanceId: 'a' }), shared: true })
  const b = idleYield(there.containers, { coordination: memoryCoordination({ hub, instanceId: 'b' }), shared: true })
  await a.start()
  await b.start()
  // A submit on a: b's session has been idle longer than a's own.
  expect(await a.forSubmit('prof_1')).toBe(true)
  await vi.waitFor(() => expect(there.released).toEqual(['ws_there']))
  expect(here.released).toEqual([])
  // Until b says it is done, a task waiting on a for that slot asks for no other.
  expect(a.forSlot('prof_1')).toBe(true)
  await settled()
  expect(here.released).toEqual([])
  there.settle('ws_there')
  // Done: the next ask takes a's own, now the longest idle of the profile.
  await vi.waitFor(async () => expect(await a.forSubmit('prof_1')).toBe(true))
  expect(here.released).toEqual(['ws_here'])
  // Nothing of the profile is idle anywhere now.
  expect(await b.forSubmit('prof_1')).toBe(false)
})
