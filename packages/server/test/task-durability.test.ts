/**
 * A task's events are durable before its end is: a crash after a task is stored as ended
 * (it is then never recovered again) must not lose events its subscribers already saw.
 * Found by the soak (a SIGKILL right after a follow-up ended lost its `result` event).
 */
import { createStorage } from 'unstorage'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

describe('task durability (docker)', () => {
  // Every write, in order: which keys, and each task record's status when written.
  const writes: { key: string; status?: string }[] = []
  const storage = createStorage()
  const setItem = storage.setItem.bind(storage)
  storage.setItem = ((key: string, value: unknown, ...rest: unknown[]) => {
    writes.push({ key, status: (value as { status?: string } | null)?.status })
    return (setItem as (...a: unknown[]) => Promise<void>)(key, value, ...rest)
  }) as typeof storage.setItem
  let t: Awaited<ReturnType<typeof taskServer>>

  beforeAll(async () => {
    t = await taskServer('docker', { berth: { storage } })
  })
  afterAll(async () => {
    await t.s.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it('writes the last events of a task before the record that says it ended', async () => {
    const task = await t.run({ prompt: 'Work [[berth:turns 1]] [[berth:text done]]' })
    expect(task.status).toBe('completed')
    const ws = task.workspace_id!
    const ended = writes.findIndex(
      (w) => w.key.endsWith(task.task_id) && w.key.startsWith('tasks:') && w.status === 'completed',
    )
    const segments = writes
      .map((w, i) => ({ ...w, i }))
      .filter((w) => w.key.startsWith('eventlog:') && w.key.includes(ws))
    expect(ended).toBeGreaterThan(0)
    expect(segments.length).toBeGreaterThan(0)
    // Every event the task has was in a segment written before its end was.
    const stored = await t.events(task.task_id)
    const lastSeq = Math.max(...stored.map((e) => e.seq))
    const covering = segments.filter((s) => Number(s.key.split(':').at(-1)!.split('-')[1]) >= lastSeq)
    expect(covering.length).toBeGreaterThan(0)
    expect(covering[0]!.i).toBeLessThan(ended)
  })
})
