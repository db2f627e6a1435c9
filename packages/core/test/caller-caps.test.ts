/**
 * Per-caller caps in the scheduler (issue 29): one caller's burst over five profiles takes
 * at most its share of the pool, another caller's task starts while the burst is still
 * queued, the waiting tasks say why, and an operator's override per caller holds.
 */
import type { TaskWaiting } from '@berth/contract'
import { describe, expect, it, vi } from 'vitest'
import { CallerCaps } from '../src/limits/caller-caps.js'
import { ConcurrencySlots } from '../src/limits/concurrency.js'
import { manualClock } from '../src/ports/clock.js'
import { Scheduler, type TaskRunner } from '../src/tasks/scheduler.js'
import type { TaskRecord } from '../src/tasks/task.js'
import { countingStore, quietLogger, taskRecord } from './task-fakes.js'

/** A scheduler whose runs end when the test says so; an ended run gives its caller's slot back (its container released). */
function setup(callers: CallerCaps) {
  const started: TaskRecord[] = []
  const finish = new Map<string, () => void>()
  const marks: { task: string; waiting: TaskWaiting }[] = []
  const runner: TaskRunner = {
    run(task) {
      started.push(task)
      return new Promise<void>((resolve) => {
        finish.set(task.id, () => {
          callers.release(task.owner_id, task.workspace_id)
          resolve()
        })
      })
    },
    makeRoom: () => false,
  }
  const scheduler = new Scheduler({
    slots: new ConcurrencySlots(5),
    callers,
    logger: quietLogger,
    mark: async (task, waiting) => void marks.push({ task: task.id, waiting }),
  })
  scheduler.serve(runner)
  return { scheduler, started, finish, marks }
}

const byOwner = (started: TaskRecord[], owner: string) => started.filter((t) => t.owner_id === owner)

describe('per-caller caps', () => {
  it("one caller's burst over five profiles leaves room for another caller, whose task starts first", async () => {
    const clock = manualClock(0)
    // A pool of 4: a share of 0.5 is two workspaces per caller.
    const callers = new CallerCaps({ store: countingStore(), clock, defaults: { poolShare: 0.5 }, poolMax: () => 4 })
    const { scheduler, started, finish, marks } = setup(callers)
    const burst = Array.from({ length: 10 }, (_, i) => taskRecord({ owner_id: 'usr_a', profile_id: `prof_${i % 5}` }))
    for (const t of burst) scheduler.enqueue(t)
    await vi.waitFor(() => expect(byOwner(started, 'usr_a')).toHaveLength(2))
    await vi.waitFor(() => expect(marks).toHaveLength(8))
    expect(new Set(marks.map((m) => m.waiting.reason))).toEqual(new Set(['caller_cap']))
    // Held back by the cap, they leave room: this instance still takes other callers' work.
    expect(scheduler.load).toBe(2)
    expect(marks[0]!.waiting.message).toContain('pool_share 0.5 of 4')
    // usr_b arrives after the whole burst and starts while usr_a's eight still wait.
    const other = taskRecord({ owner_id: 'usr_b', profile_id: 'prof_b' })
    scheduler.enqueue(other)
    await vi.waitFor(() => expect(byOwner(started, 'usr_b')).toHaveLength(1))
    expect(byOwner(started, 'usr_a')).toHaveLength(2)
    expect(burst.filter((t) => scheduler.isQueued(t.workspace_id))).toHaveLength(8)
    expect(callers.running('usr_a')).toBe(2)
    // One of usr_a's ends: exactly one more of its burst starts, the oldest waiting.
    finish.get(burst[0]!.id)!()
    await vi.waitFor(() => expect(byOwner(started, 'usr_a')).toHaveLength(3))
    expect(byOwner(started, 'usr_a').map((t) => t.id)).toEqual(burst.slice(0, 3).map((t) => t.id))
    await new Promise((r) => setTimeout(r, 20))
    expect(byOwner(started, 'usr_a')).toHaveLength(3)
    // The started task's stored reason is dropped (its first move is written without it).
    expect(started.find((t) => t.id === burst[2]!.id)?.waiting).toBeUndefined()
    scheduler.close()
    callers.close()
  })

  it("an operator's override replaces the default for that caller only", async () => {
    const clock = manualClock(0)
    const callers = new CallerCaps({ store: countingStore(), clock, defaults: { maxRunning: 3 } })
    await callers.set('usr_a', { max_running: 1, pool_share: null })
    const { scheduler, started } = setup(callers)
    for (const owner of ['usr_a', 'usr_a', 'usr_b', 'usr_b', 'usr_b', 'usr_b'])
      scheduler.enqueue(taskRecord({ owner_id: owner }))
    await vi.waitFor(() => expect(byOwner(started, 'usr_b')).toHaveLength(3))
    expect(byOwner(started, 'usr_a')).toHaveLength(1)
    expect(await callers.get('usr_a')).toEqual({ max_running: 1, pool_share: null })
    expect(callers.limitOf('usr_b')).toBe(3)
    // Cleared: the default holds again.
    await callers.set('usr_a', { max_running: null, pool_share: null })
    expect(callers.limitOf('usr_a')).toBe(3)
    scheduler.close()
    callers.close()
  })
})
