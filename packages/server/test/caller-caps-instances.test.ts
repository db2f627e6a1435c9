/**
 * Per-caller caps over two instances on one real redis-server (issue 29): a caller's cap
 * counts the workspaces it holds on every instance, so the second instance queues that
 * caller's task while another caller's starts there; after Redis loses its state (FLUSHALL)
 * the rebuild takes the running workspaces' slots again and the cap still holds.
 */
import { createCoordination, memoryStore } from '@berth/server'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { Coordination } from '../../core/src/coordination/port.js'
import { CallerCaps } from '../../core/src/limits/caller-caps.js'
import { ConcurrencySlots } from '../../core/src/limits/concurrency.js'
import { systemClock } from '../../core/src/ports/clock.js'
import { OwnedCollection } from '../../core/src/records/collection.js'
import { TaskRebuild } from '../../core/src/tasks/rebuild.js'
import { Scheduler } from '../../core/src/tasks/scheduler.js'
import type { TaskRecord } from '../../core/src/tasks/task.js'
import { WorkspacesService } from '../../core/src/workspaces/workspaces.js'

const quiet = { info() {}, warn() {}, error() {} }

let seq = 0
function task(owner: string): TaskRecord {
  seq++
  const now = new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString()
  return {
    id: `task_${seq}`,
    owner_id: owner,
    mode: 'batch',
    profile_id: `prof_${seq % 5}`,
    prompt: 'hello',
    priority: 'normal',
    workspace_id: `ws_${seq}`,
    session_id: `ses_${seq}`,
    allowed_tools: null,
    max_turns: null,
    max_budget_usd: null,
    status: 'queued',
    started_at: null,
    finished_at: null,
    result: null,
    error: null,
    instance_id: null,
    created_at: now,
    updated_at: now,
  }
}

/** One instance: its coordination, caps (usr_a's default cap is 2 workspaces), and a scheduler whose runs never end. */
function instance(coordination: Coordination) {
  const store = memoryStore()
  const callers = new CallerCaps({ store, clock: systemClock, defaults: { maxRunning: 2 }, slots: coordination.slots })
  const slots = new ConcurrencySlots(5, { slots: coordination.slots })
  const started: TaskRecord[] = []
  const scheduler = new Scheduler({ slots, callers, logger: quiet })
  const run = (t: TaskRecord) => {
    started.push(t)
    return new Promise<void>(() => {})
  }
  scheduler.serve({ run, makeRoom: () => false })
  const rebuild = new TaskRebuild({
    coordination,
    store,
    clock: systemClock,
    records: new OwnedCollection<TaskRecord>(store, 'tasks', 'task'),
    scheduler,
    slots,
    callers,
    workspaces: new WorkspacesService(store, systemClock),
  })
  const close = () => {
    scheduler.close()
    callers.close()
    slots.close()
  }
  return { callers, scheduler, started, rebuild, close }
}

let redis: LocalRedis
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(async () => {
  await redis?.stop()
})

describe('per-caller caps across instances', () => {
  it('holds over two instances on one Redis, lets another caller start first, and survives a flush', async () => {
    const coords = await Promise.all(
      [1, 2].map(() => createCoordination({ driver: 'redis', url: redis.path, prefix: 'caps:' })),
    )
    const [one, two] = coords.map(instance) as [ReturnType<typeof instance>, ReturnType<typeof instance>]
    try {
      // usr_a's burst on instance one takes its two slots.
      for (let i = 0; i < 4; i++) one.scheduler.enqueue(task('usr_a'))
      await vi.waitFor(() => expect(one.started).toHaveLength(2))
      // On instance two, usr_a is at its cap already: usr_b's task, queued after, starts first.
      const a = task('usr_a')
      const b = task('usr_b')
      two.scheduler.enqueue(a)
      two.scheduler.enqueue(b)
      await vi.waitFor(() => expect(two.started.map((t) => t.id)).toEqual([b.id]))
      expect(two.scheduler.isQueued(a.workspace_id)).toBe(true)
      expect(await two.callers.tryTake('usr_a', 'ws_probe')).toBe(false)

      // Redis loses everything; the rebuild on reset takes the running workspaces' slots again.
      const client = redis.connect()
      await client.flushall()
      await client.quit()
      await one.rebuild.rebuild({ reset: true })
      await two.rebuild.rebuild({ reset: true })
      expect(await two.callers.tryTake('usr_a', 'ws_probe')).toBe(false)
      expect(two.scheduler.isQueued(a.workspace_id)).toBe(true)
      // One of usr_a's workspaces gives its container back on instance one: instance two's task may start.
      one.callers.release('usr_a', one.started[0]!.workspace_id)
      await vi.waitFor(() => expect(two.started.map((t) => t.id)).toEqual([b.id, a.id]), { timeout: 5_000 })
    } finally {
      one.close()
      two.close()
      for (const c of coords) await c.close()
    }
  }, 30_000)
})
