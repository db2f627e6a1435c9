/**
 * Rebuilding the coordination from the store, on one memory hub whose state is cleared as a
 * flushed Redis would be: queued tasks back on their queues (once, whoever rebuilds), slots
 * of running tasks re-acquired by their instance, single-use keys still used.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { durableOnce } from '../src/coordination/durable-once.js'
import { memoryCoordination } from '../src/coordination/memory.js'
import { memoryHub, type MemoryHub } from '../src/coordination/memory-hub.js'
import type { Coordination } from '../src/coordination/port.js'
import { CoordinationRebuild } from '../src/coordination/rebuild.js'
import { ConcurrencySlots } from '../src/limits/concurrency.js'
import { manualClock } from '../src/ports/clock.js'
import { OwnedCollection } from '../src/records/collection.js'
import { instanceQueue, SHARED_QUEUE } from '../src/tasks/dispatch.js'
import { TaskRebuild } from '../src/tasks/rebuild.js'
import { Scheduler } from '../src/tasks/scheduler.js'
import { activeKey, type TaskRecord } from '../src/tasks/task.js'
import { WorkspacesService, type WorkspaceRecord } from '../src/workspaces/workspaces.js'
import { countingStore, quietLogger, taskRecord } from './task-fakes.js'

/** What a flush of Redis does to the hub: every queue, slot, key and delayed job gone. */
function flush(hub: MemoryHub): void {
  hub.queues.clear()
  hub.slots.clear()
  hub.once.clear()
  hub.delayed.clear()
}

const opened: { coordination: Coordination; slots: ConcurrencySlots }[] = []
afterEach(async () => {
  for (const { coordination, slots } of opened.splice(0)) {
    slots.close()
    await coordination.close().catch(() => {})
  }
})

function world() {
  const hub = memoryHub()
  const store = countingStore()
  // The tasks below were created on 2026-01-01 at 00:00:0n; the clock stands 30 s later.
  const clock = manualClock(Date.UTC(2026, 0, 1, 0, 0, 30))
  const records = new OwnedCollection<TaskRecord>(store, 'tasks', 'task')
  const workspaces = new WorkspacesService(store, clock)
  const instance = (id: string) => {
    const coordination = memoryCoordination({ hub, instanceId: id })
    const slots = new ConcurrencySlots(5, { slots: coordination.slots })
    opened.push({ coordination, slots })
    const scheduler = new Scheduler({ slots, logger: quietLogger })
    const rebuild = new TaskRebuild({ coordination, store, clock, records, scheduler, slots, workspaces })
    return { coordination, slots, scheduler, rebuild }
  }
  const save = async (t: TaskRecord) => {
    await records.put(t)
    await store.set(activeKey(t.id), { owner: t.owner_id })
    return t
  }
  const waiting = async (c: Coordination, queue: string) => (await c.queue(queue).counts()).waiting
  return { hub, store, clock, records, workspaces, instance, save, waiting }
}

describe('TaskRebuild', () => {
  it('puts queued tasks back on their queues once, with two instances rebuilding at once, and re-takes running slots', async () => {
    const w = world()
    const a = w.instance('A')
    const b = w.instance('B')
    const waits = await w.save(taskRecord())
    // A session's follow-up waits for the instance holding its container (B).
    const followUp = await w.save(taskRecord({ mode: 'session' }))
    await w.store.set(`workspaces:${followUp.owner_id}:${followUp.workspace_id}`, {
      id: followUp.workspace_id,
      owner_id: followUp.owner_id,
      profile_id: followUp.profile_id,
      container_id: 'c1',
      instance_id: 'B',
      status: 'running',
    } as Partial<WorkspaceRecord>)
    // Taken by B (in its scheduler): not put back.
    await w.save(taskRecord({ instance_id: 'B' }))
    const running = await w.save(taskRecord({ status: 'running', instance_id: 'A' }))
    await w.save(taskRecord({ status: 'completed' }))
    await a.coordination.queue(SHARED_QUEUE).add({ id: waits.id, owner: waits.owner_id, payload: {} })

    flush(w.hub)
    expect(await w.waiting(a.coordination, SHARED_QUEUE)).toBe(0)
    const [ra, rb] = await Promise.all([a.rebuild.rebuild({ reset: true }), b.rebuild.rebuild({ reset: true })])
    expect(ra.requeued + rb.requeued).toBe(2)
    expect(await w.waiting(a.coordination, SHARED_QUEUE)).toBe(1)
    expect(await w.waiting(a.coordination, instanceQueue('B'))).toBe(1)
    expect((await a.coordination.queue(SHARED_QUEUE).take())?.id).toBe(waits.id)
    // A's running task holds its slot again (a flush had dropped the lease).
    expect(await a.coordination.slots.holders(`profile:${running.profile_id}`)).toContain(running.workspace_id)
    // Again: nothing more is added (the ids are still there, or taken).
    const again = await a.rebuild.rebuild({ reset: true })
    expect(again.requeued).toBe(0)
    expect(await w.waiting(a.coordination, instanceQueue('B'))).toBe(1)
  })

  it('the slow reconcile requeues only tasks older than its threshold', async () => {
    const w = world()
    const a = w.instance('A')
    const old = await w.save(taskRecord())
    w.clock.advance(60_000)
    await w.save(taskRecord({ created_at: new Date(w.clock.now()).toISOString() }))
    const r = await a.rebuild.rebuild({ reset: false, olderThanMs: 60_000 })
    expect(r.requeued).toBe(1)
    expect((await a.coordination.queue(SHARED_QUEUE).take())?.id).toBe(old.id)
  })
})

describe('durableOnce', () => {
  it('keeps a used key used after the backend lost it, until it expires; delete frees it', async () => {
    const hub = memoryHub()
    const clock = manualClock(0)
    const coordination = memoryCoordination({ hub, instanceId: 'A' })
    opened.push({ coordination, slots: new ConcurrencySlots(1) })
    const store = countingStore()
    const once = durableOnce(coordination.once, store, clock)
    expect(await once.claimOnce('oauth-state:n1', 600_000)).toBe(true)
    expect(await once.setIfAbsent('req:r1', 'task_1', 60_000)).toBeNull()
    flush(hub)
    // The bare backend forgot both; the durable keys did not.
    expect(await coordination.once.get('req:r1')).toBeNull()
    expect(await once.claimOnce('oauth-state:n1', 600_000)).toBe(false)
    expect(await once.setIfAbsent('req:r1', 'task_2', 60_000)).toBe('task_1')
    expect(await once.get('req:r1')).toBe('task_1')
    await once.delete('req:r1')
    expect(await once.setIfAbsent('req:r1', 'task_3', 60_000)).toBeNull()
    // Past its ttl a key is free again, and its record is swept.
    clock.advance(600_001)
    flush(hub)
    expect(await once.sweep()).toBe(2)
    expect(await store.keys('once-keys:')).toEqual([])
    expect(await once.claimOnce('oauth-state:n1', 600_000)).toBe(true)
  })
})

describe('CoordinationRebuild', () => {
  it('rebuilds on start and on a reset, one run at a time, and a failing part does not stop the others', async () => {
    let resets = 0
    let handler: ((c: { reset: boolean }) => void) | null = null
    const coordination = {
      onStateChange: (h: (c: { reset: boolean }) => void) => {
        handler = h
        return () => {}
      },
    } as unknown as Coordination
    const calls: string[] = []
    const rebuild = new CoordinationRebuild({
      coordination,
      logger: quietLogger,
      parts: {
        broken: {
          rebuild: async () => {
            throw new Error('down')
          },
        },
        tasks: {
          rebuild: async (o) => {
            calls.push(o.reset ? 'reset' : `reconcile>${o.olderThanMs}`)
            if (o.reset) resets++
          },
        },
      },
    })
    await rebuild.start({ reconcileMs: null })
    expect(calls).toEqual(['reset'])
    handler!({ reset: false })
    handler!({ reset: true })
    await Promise.all([rebuild.run({ reset: false }), rebuild.run({ reset: false })])
    await rebuild.run({ reset: false })
    rebuild.close()
    // The reset ran; the two reconciles asked during it ran as one after it.
    expect(resets).toBe(2)
    expect(calls).toEqual(['reset', 'reset', 'reconcile>60000', 'reconcile>60000'])
  })
})
