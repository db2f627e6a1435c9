/**
 * A workspace deleted while its idle session is being released (the release saves the
 * workspace's files first; a caller's waiting task asked for the release) still gives back
 * its container, its profile slot and its caller's cap: the hostile soak found the
 * container left running and the cap held for good.
 */
import { notFound } from '@berth/contract'
import { expect, it, vi } from 'vitest'
import type { Lease } from '../src/runtime/index.js'
import { SessionContainers, type SessionContainersOptions } from '../src/tasks/session-containers.js'
import { quietLogger } from './task-fakes.js'

it('a delete racing an idle release: the container is still released, slot and cap given back', async () => {
  let deleted = false
  let saved!: () => void
  const savedGate = new Promise<void>((r) => (saved = r))
  const lease = { container: { id: 'c1', engine_id: 'e1', owner_id: 'usr_a' }, release: vi.fn(async () => {}) }
  const record = { id: 'ws_1', owner_id: 'usr_a', profile_id: 'prof_1', volume: null, sdk_session_id: null }
  const slots = { release: vi.fn() }
  const callers = { release: vi.fn() }
  const containers = new SessionContainers({
    engine: {
      runtime: {},
      pool: {
        list: () => [{ id: 'c1', state: 'in_use', workspace_id: 'ws_1' }],
        leaseOf: () => lease as unknown as Lease,
      },
    },
    workspaces: {
      records: { find: async () => (deleted ? null : record) },
      setStatus: async () => {
        if (deleted) throw notFound('workspace', 'ws_1')
        return record
      },
    },
    snapshots: { save: () => savedGate },
    slots,
    callers,
    scheduler: { isBusy: () => false, isQueued: () => false, isWanted: () => false, wake: () => {} },
    conversations: {},
    logger: quietLogger,
  } as unknown as SessionContainersOptions)
  containers.adopt()
  containers.keepWarm('usr_a', 'ws_1', 'ses_1')
  // A task of usr_a waits for its cap: the idle session is released, its files being saved...
  expect(containers.yieldIdle('ws_1')).not.toBeNull()
  // ...when the workspace is deleted (its delete finds nothing warm left to release).
  await containers.release('usr_a', 'ws_1')
  deleted = true
  saved()
  await vi.waitFor(() => expect(lease.release).toHaveBeenCalledTimes(1))
  expect(callers.release).toHaveBeenCalledWith('usr_a', 'ws_1')
  expect(slots.release).toHaveBeenCalledWith('prof_1', 'ws_1')
  containers.close()
})
