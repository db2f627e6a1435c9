/**
 * Session containers over fakes: a stop that ends the containers (`local`) releases the idle
 * warm sessions as their idle timers would, and a container adopted after a restart for a
 * session's workspace is recorded as a session's, whatever it was claimed as.
 */
import { expect, it, vi } from 'vitest'
import type { Lease, PooledContainer } from '../src/runtime/index.js'
import { SessionContainers, type SessionContainersOptions } from '../src/tasks/session-containers.js'
import { quietLogger } from './task-fakes.js'

/** Warm containers of `workspaces` (adopted as a restart adopts them), with `busy` running a task. */
function fakes(workspaces: string[], busy: string[] = [], purpose: PooledContainer['purpose'] = 'session') {
  const containers = workspaces.map(
    (ws, i): Partial<PooledContainer> => ({
      id: `c${i}`,
      engine_id: `e${i}`,
      owner_id: 'usr_a',
      state: 'in_use',
      workspace_id: ws,
      purpose,
    }),
  )
  const leases = new Map<string, Lease>(
    containers.map((c) => [c.id!, { container: c, release: vi.fn(async () => {}) } as unknown as Lease]),
  )
  const record = (id: string) => ({
    id,
    owner_id: 'usr_a',
    profile_id: 'prof_1',
    session_id: `ses_${id}`,
    volume: null,
    sdk_session_id: 'sdk_1',
  })
  const o = {
    engine: {
      runtime: {},
      pool: { list: () => containers, leaseOf: (id: string) => leases.get(id)!, assign: vi.fn(async () => {}) },
    },
    workspaces: { records: { find: async (_: string, id: string) => record(id) }, setStatus: vi.fn(async () => {}) },
    conversations: { save: vi.fn(async () => {}) },
    snapshots: { save: vi.fn(async () => {}) },
    slots: { acquire: vi.fn(), release: vi.fn() },
    scheduler: {
      isBusy: (id: string) => busy.includes(id),
      isQueued: () => false,
      isWanted: (id: string) => busy.includes(id),
      wake: () => {},
    },
    logger: quietLogger,
  }
  const sessions = new SessionContainers(o as unknown as SessionContainersOptions)
  sessions.adopt()
  return { o, sessions, leases, record }
}

it('releases every idle warm session at once, its conversation and files kept, and leaves a running one', async () => {
  const { o, sessions, leases } = fakes(['ws_idle', 'ws_other', 'ws_busy'], ['ws_busy'])
  sessions.keepWarm('usr_a', 'ws_idle', 'ses_1')
  await sessions.releaseIdleSessions()
  for (const [ws, n] of [
    ['ws_idle', 0],
    ['ws_other', 1],
  ] as const) {
    expect(o.conversations.save).toHaveBeenCalledWith({}, `e${n}`, expect.objectContaining({ id: ws }))
    expect(o.snapshots.save).toHaveBeenCalledWith({}, `e${n}`, 'usr_a', ws)
    expect(o.workspaces.setStatus).toHaveBeenCalledWith('usr_a', ws, 'idle', { container_id: null, agent: null })
    expect(leases.get(`c${n}`)!.release).toHaveBeenCalledTimes(1)
  }
  expect(leases.get('c2')!.release).not.toHaveBeenCalled()
  expect(sessions.has('ws_busy')).toBe(true)
  expect(sessions.has('ws_idle')).toBe(false)
  sessions.close()
})

it('a container adopted for a warm session is recorded as a session’s, even one claimed as a batch warm agent', async () => {
  const { o, sessions, record } = fakes(['ws_1'], [], 'batch')
  await sessions.resume({ ...record('ws_1'), status: 'running' } as never, false)
  expect(o.engine.pool.assign).toHaveBeenCalledWith('c0', 'ws_1', 'session')
  sessions.close()
})
