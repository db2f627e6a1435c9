/** What the queue order looks at in a queued task. */
export interface QueuedTask {
  id: string
  owner_id: string
  workspace_id: string
  priority: 'low' | 'normal' | 'high'
  created_at: string
}

const RANK = { high: 0, normal: 1, low: 2 } as const

/**
 * The index of the queued task to start next, or -1: among the tasks `ready` admits, the
 * highest priority, then the owner with the fewest tasks running, then the oldest.
 * `runningOwners` holds one owner id per running task.
 *
 * @example
 * ```ts
 * nextQueued(queue, ['usr_a', 'usr_a'], () => true) // usr_b's task before usr_a's third
 * ```
 */
export function nextQueued<T extends QueuedTask>(queue: readonly T[], runningOwners: Iterable<string>, ready: (t: T) => boolean): number {
  const runningBy = new Map<string, number>()
  for (const owner of runningOwners) runningBy.set(owner, (runningBy.get(owner) ?? 0) + 1)
  const key = (x: T) => [RANK[x.priority], runningBy.get(x.owner_id) ?? 0, x.created_at, x.id] as const
  let best = -1
  let bestKey: ReturnType<typeof key> | undefined
  for (let i = 0; i < queue.length; i++) {
    const t = queue[i]!
    if (!ready(t)) continue
    const k = key(t)
    if (bestKey && !before(k, bestKey)) continue
    best = i
    bestKey = k
  }
  return best
}

function before(a: readonly (string | number)[], b: readonly (string | number)[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!
  return false
}
