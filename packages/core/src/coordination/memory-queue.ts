import { holds, type MemoryHub, type MemoryJob } from './memory-hub.js'
import { checkQueueName, queueRank } from './order.js'
import type { JobQueue, TakenJob } from './port.js'

/**
 * One named queue of a memory hub, as seen from one instance.
 *
 * @example
 * ```ts
 * const q = memoryQueue(hub, 'inst_a', 'tasks')
 * await q.add({ id: 'task_1', owner: 'usr_1', payload: {} })
 * ```
 */
export function memoryQueue<P>(hub: MemoryHub, instance: string, name: string): JobQueue<P> {
  checkQueueName(name)
  const jobs = () => {
    let q = hub.queues.get(name)
    if (!q) {
      q = new Map()
      hub.queues.set(name, q)
    }
    return q
  }
  // Jobs of a lapsed holder go back where they were; retries whose delay passed are ready.
  const settle = (q: Map<string, MemoryJob>) => {
    const now = hub.clock.now()
    for (const j of q.values()) {
      if (j.state === 'active' && !holds(hub, j.holder)) Object.assign(j, { state: 'waiting', holder: null })
      if (j.state === 'delayed' && j.readyAt <= now) j.state = 'waiting'
    }
  }
  const mine = (job: TakenJob<P>): MemoryJob | null => {
    const q = jobs()
    settle(q)
    const j = q.get(job.id)
    return j && j.state === 'active' && j.token === job.token && j.holder === instance && holds(hub, instance)
      ? j
      : null
  }
  let taken = 0

  return {
    name,
    async add(job) {
      const q = jobs()
      if (q.has(job.id)) return false
      const priority = job.priority ?? 'normal'
      const backlog = [...q.values()].filter((j) => j.owner === job.owner).length
      q.set(job.id, {
        id: job.id,
        owner: job.owner,
        priority,
        payload: JSON.stringify(job.payload),
        rank: queueRank(priority, backlog),
        seq: ++hub.seq,
        state: 'waiting',
        readyAt: 0,
        holder: null,
        token: '',
        deliveries: 0,
      })
      return true
    },
    async take() {
      const q = jobs()
      settle(q)
      let next: MemoryJob | undefined
      for (const j of q.values())
        if (j.state === 'waiting' && (!next || j.rank < next.rank || (j.rank === next.rank && j.seq < next.seq)))
          next = j
      if (!next) return null
      Object.assign(next, {
        state: 'active',
        holder: instance,
        token: `${instance}:${++taken}`,
        deliveries: next.deliveries + 1,
      })
      const { id, owner, priority, deliveries, token } = next
      return { id, owner, priority, payload: JSON.parse(next.payload) as P, deliveries, token }
    },
    async ack(job) {
      return mine(job) ? jobs().delete(job.id) : false
    },
    async fail(job, opts = {}) {
      const j = mine(job)
      if (!j) return false
      if (opts.retryInMs === undefined) return jobs().delete(job.id)
      const delay = Math.max(0, opts.retryInMs)
      // Back at once: in front of its rank (it was next); after a delay: behind it.
      const seq = delay > 0 ? ++hub.seq : -++hub.seq
      Object.assign(j, {
        state: delay > 0 ? 'delayed' : 'waiting',
        readyAt: hub.clock.now() + delay,
        holder: null,
        token: '',
        seq,
      })
      return true
    },
    async cancel(id) {
      const q = jobs()
      settle(q)
      const j = q.get(id)
      return !!j && j.state !== 'active' && q.delete(id)
    },
    async counts() {
      const q = jobs()
      settle(q)
      const counts = { waiting: 0, active: 0, delayed: 0 }
      for (const j of q.values()) counts[j.state]++
      return counts
    },
  }
}
