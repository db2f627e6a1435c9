import { describe, expect, it } from 'vitest'
import { nextQueued, type QueuedTask } from '../src/tasks/scheduler.js'

const task = (
  id: string,
  owner_id: string,
  created_at: string,
  priority: QueuedTask['priority'] = 'normal',
): QueuedTask => ({
  id,
  owner_id,
  workspace_id: `ws_${id}`,
  priority,
  created_at,
})

describe('task queue order', () => {
  it('starts the task of the owner holding fewer running tasks first, whatever the age', () => {
    const queue = [task('a3', 'usr_a', '2026-01-01T00:00:01Z'), task('b1', 'usr_b', '2026-01-01T00:00:02Z')]
    // usr_a has two tasks running: usr_b's newer task goes first.
    expect(queue[nextQueued(queue, ['usr_a', 'usr_a'], () => true)]!.id).toBe('b1')
    // Nobody running: the older task goes first.
    expect(queue[nextQueued(queue, [], () => true)]!.id).toBe('a3')
    // usr_b busier than usr_a: usr_a goes first.
    expect(queue[nextQueued(queue, ['usr_b'], () => true)]!.id).toBe('a3')
  })

  it('puts priority before fairness and skips tasks that cannot start', () => {
    const queue = [task('a1', 'usr_a', '2026-01-01T00:00:03Z', 'high'), task('b1', 'usr_b', '2026-01-01T00:00:01Z')]
    expect(queue[nextQueued(queue, ['usr_a', 'usr_a'], () => true)]!.id).toBe('a1')
    expect(queue[nextQueued(queue, [], (t) => t.id !== 'a1')]!.id).toBe('b1')
    expect(nextQueued(queue, [], () => false)).toBe(-1)
  })
})
