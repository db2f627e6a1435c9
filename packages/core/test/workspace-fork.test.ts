/**
 * Forking without a container to read: a released workspace's kept files and conversation
 * are copied in the store; nothing kept, or a container only another instance holds, is a
 * 409 that leaves no fork behind.
 */
import { isApiError, newId } from '@berth/contract'
import { beforeEach, describe, expect, it } from 'vitest'
import { memoryBlobs } from '../src/ports/blob-store.js'
import { systemClock } from '../src/ports/clock.js'
import { OwnedCollection } from '../src/records/collection.js'
import type { TaskEngine } from '../src/tasks/engine.js'
import type { TaskRecord } from '../src/tasks/task.js'
import { Checkpoints } from '../src/workspaces/checkpoints.js'
import { EventLog } from '../src/workspaces/event-log.js'
import { forkWorkspace, type ForkDeps } from '../src/workspaces/fork.js'
import { WorkspaceSnapshots } from '../src/workspaces/workspace-snapshots.js'
import { WorkspacesService, type WorkspaceRecord } from '../src/workspaces/workspaces.js'
import { countingStore, quietLogger, taskRecord } from './task-fakes.js'

const OWNER = 'usr_forker'

describe('forkWorkspace from the store', () => {
  let d: ForkDeps
  let ws: WorkspaceRecord
  let task: TaskRecord
  beforeEach(async () => {
    const store = countingStore()
    const workspaces = new WorkspacesService(store, systemClock)
    const tasks = { records: new OwnedCollection<TaskRecord>(store, 'tasks', 'task') }
    const eventLog = new EventLog(store, systemClock)
    const blobs = memoryBlobs()
    const snapshots = new WorkspaceSnapshots({ store, blobs, clock: systemClock, logger: quietLogger })
    // An engine whose pool holds no container: this instance reaches none.
    const engine = { pool: { list: () => [] } } as unknown as TaskEngine
    const checkpoints = new Checkpoints({ store, blobs, clock: systemClock, logger: quietLogger, engine, eventLog })
    d = { store, workspaces, tasks, eventLog, engine, snapshots, checkpoints }
    ws = await workspaces.create(OWNER, { profile_id: newId('profile'), persistent: false })
    ws = await workspaces.setStatus(OWNER, ws.id, 'idle', { sdk_session_id: 'sdk-1' })
    task = await tasks.records.put(
      taskRecord({ owner_id: OWNER, mode: 'session', workspace_id: ws.id, status: 'completed' }),
    )
    await eventLog.append(OWNER, ws.id, [{ type: 'user_message', task_id: task.id, text: 'hello' }])
  })

  const refusal = (p: Promise<unknown>) =>
    p.then(
      () => null,
      (e: unknown) => (isApiError(e) ? e : null),
    )

  it('copies the kept files and conversation of a released workspace; the fork plants them at its first task', async () => {
    await d.store.set(`ws-files:${OWNER}:${ws.id}`, { tar: 'dGFy', saved_at: Date.now() })
    await d.store.set(`ws-conversations:${OWNER}:${ws.id}`, { tar: 'Y29udg==' })
    const fork = await forkWorkspace(d, OWNER, ws.id, {})
    expect(fork).toMatchObject({ status: 'idle', forked_from: { workspace_id: ws.id, task_id: task.id } })
    const record = await d.workspaces.records.get(OWNER, fork.id)
    expect(record).toMatchObject({ seed_files: true, sdk_session_id: 'sdk-1' })
    expect(await d.store.get(`ws-files:${OWNER}:${fork.id}`)).toMatchObject({ tar: 'dGFy' })
    expect(await d.store.get(`ws-conversations:${OWNER}:${fork.id}`)).toEqual({ tar: 'Y29udg==' })
    expect(await d.eventLog.read(OWNER, fork.id, { after: 0, limit: 10 })).toEqual(
      await d.eventLog.read(OWNER, ws.id, { after: 0, limit: 10 }),
    )
  })

  it('409 with nothing kept, or a container only another instance holds; no fork is left behind', async () => {
    const nothing = await refusal(forkWorkspace(d, OWNER, ws.id, {}))
    expect(nothing).toMatchObject({ code: 'CONFLICT' })
    expect(nothing!.message).toContain('nothing left to fork')
    await d.workspaces.patch(OWNER, ws.id, { status: 'running', container_id: newId('container') })
    const elsewhere = await refusal(forkWorkspace(d, OWNER, ws.id, {}))
    expect(elsewhere).toMatchObject({ code: 'CONFLICT' })
    expect(elsewhere!.message).toContain('another instance')
    expect((await d.workspaces.records.list(OWNER, { page: 1, limit: 10 })).total).toBe(1)
  })
})
