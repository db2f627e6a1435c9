/** The task page's ordering: dedupe by seq, order by seq, gaps refetched from the log. */
import { describe, expect, it } from 'vitest'
import { SeqStream, type TranscriptEvent } from '../src/ui/seq-stream.js'

const ev = (seq: number, task_id = 'task_a'): TranscriptEvent => ({
  seq,
  at: '2026-01-01T00:00:00.000Z',
  type: 'token',
  task_id,
  text: `t${seq}`,
})

function setup(log: TranscriptEvent[]) {
  const delivered: number[] = []
  const fetches: number[] = []
  const s = new SeqStream({
    deliver: (events) => delivered.push(...events.map((e) => e.seq)),
    fetchAfter: async (after) => {
      fetches.push(after)
      return log.filter((e) => e.seq > after)
    },
  })
  return { s, delivered, fetches }
}

describe('SeqStream', () => {
  it('delivers each event once, in seq order, whatever order and repeats they come in', async () => {
    const log = [1, 2, 3, 4, 5].map((n) => ev(n))
    const { s, delivered } = setup(log)
    s.push([ev(1), ev(2), ev(2), ev(1)])
    s.push([ev(4), ev(3), ev(5), ev(3)])
    await s.settled()
    expect(delivered).toEqual([1, 2, 3, 4, 5])
    s.push(log)
    expect(delivered).toEqual([1, 2, 3, 4, 5])
  })

  it('catches up with events dropped at the end when synced', async () => {
    const log = [1, 2, 3].map((n) => ev(n))
    const { s, delivered } = setup(log)
    s.push([ev(1)])
    await s.settled()
    expect(delivered).toEqual([1])
    await s.sync()
    expect(delivered).toEqual([1, 2, 3])
  })

  it('holds events after a gap and fills it from the log', async () => {
    const log = [1, 2, 3, 4, 5, 6].map((n) => ev(n))
    const { s, delivered, fetches } = setup(log)
    s.push([ev(1), ev(2)])
    // 3 and 4 never came live (a reconnect): 5 arrives first and must wait.
    s.push([ev(5)])
    expect(delivered).toEqual([1, 2])
    await s.settled()
    expect(fetches).toEqual([2])
    expect(delivered).toEqual([1, 2, 3, 4, 5, 6])
    expect(s.waiting).toBe(0)
  })

  it("skips seqs the log confirms belong to no event of this task (another task's, in a session)", async () => {
    const log = [ev(1), ev(2), ev(7), ev(8)]
    const { s, delivered } = setup(log)
    s.push([ev(1), ev(2), ev(7)])
    await s.settled()
    expect(delivered).toEqual([1, 2, 7, 8])
  })

  it('keeps a fast stream whole: 5,000 events, shuffled in windows, with duplicates and drops', async () => {
    const n = 5000
    const log = Array.from({ length: n }, (_, i) => ev(i + 1))
    const { s, delivered } = setup(log)
    let seed = 7
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    for (let i = 0; i < n; i += 50) {
      const window = log.slice(i, i + 50).filter(() => rand() > 0.02)
      window.sort(() => rand() - 0.5)
      s.push([...window, ...window.slice(0, 5)])
      await Promise.resolve()
    }
    await s.settled()
    // Drops at the very end leave no gap behind them: the page syncs when the task ends.
    await s.sync()
    expect(delivered).toEqual(log.map((e) => e.seq))
  })
})
