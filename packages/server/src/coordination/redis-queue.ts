import { randomUUID } from 'node:crypto'
import { checkQueueName, queueRank, type JobPriority, type JobQueue, type NewJob, type TakenJob } from '@berth/core'
import { type Job, Queue, Worker, type ConnectionOptions } from 'bullmq'
import type { CoordinationScripts } from './redis-scripts.js'

/** What a BullMQ job of a Berth queue carries. */
interface JobData {
  id: string
  owner: string
  priority: JobPriority
  payload: unknown
}

/** What the queues of one instance share. */
export interface RedisQueueContext {
  connection: ConnectionOptions
  /** BullMQ's key prefix (`<prefix>q`): keys are `<prefix>q:<queue>:<kind>`. */
  bullPrefix: string
  /** Berth's own keys of a queue (`<prefix>qi:<queue>` ids, `<prefix>qo:<queue>` owners). */
  key(kind: 'qi' | 'qo', queue: string): string
  scripts: CoordinationScripts
  instanceId: string
  leaseMs: number
  /** Told of connection errors. */
  onError(err: unknown): void
}

/**
 * A BullMQ job id for a Berth id: BullMQ refuses ids with `:` and all-digit ids.
 *
 * @example
 * ```ts
 * bullId('dlv_1:2') // 'b.dlv_1%3A2'
 * ```
 */
export function bullId(id: string): string {
  return `b.${id.replaceAll('%', '%25').replaceAll(':', '%3A')}`
}

/**
 * One Berth job queue on BullMQ, as seen from one instance: jobs added with a BullMQ priority
 * (Berth's priority and owner fairness as one number), taken by a manual worker
 * (`getNextJob`) whose locks this instance renews while it lives; BullMQ's stalled-job check
 * hands a dead instance's jobs out again.
 *
 * @example
 * ```ts
 * const q = redisQueue(ctx, 'tasks')
 * await q.add({ id: 'task_1', owner: 'usr_1', payload: {} })
 * const job = await q.take()
 * ```
 */
export function redisQueue<P>(ctx: RedisQueueContext, name: string): RedisQueue<P> {
  checkQueueName(name)
  const opts = { connection: ctx.connection, prefix: ctx.bullPrefix }
  const queue = new Queue(name, opts)
  // BullMQ re-emits its connection's errors: unheard, an 'error' event would throw.
  queue.on('error', ctx.onError)
  const ids = ctx.key('qi', name)
  const owners = ctx.key('qo', name)
  /** Jobs this instance holds: Berth id → the BullMQ job and its lock token. */
  const held = new Map<string, { job: Job; token: string }>()
  let worker: Worker | null = null
  const workerOf = () => {
    if (!worker) {
      worker = new Worker(name, null, {
        ...opts,
        autorun: false,
        lockDuration: ctx.leaseMs,
        stalledInterval: Math.max(50, Math.floor(ctx.leaseMs / 2)),
        // A dead instance's job always comes back: the taker decides what a redelivery means.
        maxStalledCount: 1_000_000,
      })
      worker.on('error', ctx.onError) // connection trouble: BullMQ reconnects; calls reject meanwhile
      void worker.startStalledCheckTimer()
    }
    return worker
  }
  const forget = (id: string) => ctx.scripts.berthJobForget([ids, owners], id)
  const release = async (job: TakenJob<P>, move: (j: Job, token: string) => Promise<unknown>, drop: boolean) => {
    const h = held.get(job.id)
    if (!h || h.token !== job.token) return false
    held.delete(job.id)
    try {
      await move(h.job, h.token)
    } catch {
      return false // the lock was lost: the job went back to the queue or to another worker
    }
    if (drop) await forget(job.id)
    return true
  }

  return {
    name,
    async add(job: NewJob<P>) {
      const backlog = (await ctx.scripts.berthJobAdmit([ids, owners], job.id, job.owner)) as number
      if (backlog < 0) return false
      const priority = job.priority ?? 'normal'
      const data: JobData = { id: job.id, owner: job.owner, priority, payload: job.payload }
      try {
        await queue.add('job', data, {
          jobId: bullId(job.id),
          priority: queueRank(priority, backlog),
          removeOnComplete: true,
          removeOnFail: true,
        })
      } catch (err) {
        await forget(job.id)
        throw err
      }
      return true
    },
    async take() {
      const token = `${ctx.instanceId}:${randomUUID()}`
      const job = await workerOf().getNextJob(token, { block: false })
      if (!job) return null
      const data = job.data as JobData
      held.set(data.id, { job, token })
      return {
        id: data.id,
        owner: data.owner,
        priority: data.priority,
        payload: data.payload as P,
        deliveries: job.attemptsStarted,
        token,
      }
    },
    ack: (job) => release(job, (j, token) => j.moveToCompleted(null, token, false), true),
    fail(job, o = {}) {
      if (o.retryInMs === undefined)
        return release(job, (j, token) => j.moveToFailed(new Error('failed'), token, false), true)
      const delay = Math.max(0, o.retryInMs)
      return release(
        job,
        (j, token) => (delay > 0 ? j.moveToDelayed(Date.now() + delay, token) : j.moveToWait(token)),
        false,
      )
    },
    async cancel(id) {
      // `remove` refuses a locked (active) job (and answers 1 for a missing one: the
      // reservation decides); an id reserved without a job (its adder died) is freed too.
      if ((await queue.remove(bullId(id))) !== 1) return false
      return (await forget(id)) === 1
    },
    async counts() {
      const c = await queue.getJobCounts('wait', 'prioritized', 'active', 'delayed')
      return { waiting: (c.wait ?? 0) + (c.prioritized ?? 0), active: c.active ?? 0, delayed: c.delayed ?? 0 }
    },
    async renewLeases() {
      if (!worker || held.size === 0) return
      const entries = [...held]
      const failed = (await worker.extendJobLocks(
        entries.map(([, h]) => h.job.id!),
        entries.map(([, h]) => h.token),
        ctx.leaseMs,
      )) as string[]
      for (const [id, h] of entries) if (failed.includes(h.job.id!)) held.delete(id)
    },
    async close() {
      await worker?.close(true)
      await queue.close()
    },
    async disconnect() {
      await worker?.disconnect()
      await queue.disconnect()
    },
  }
}

/** A queue plus what the instance does with it. */
export interface RedisQueue<P> extends JobQueue<P> {
  /** Extend the locks of the jobs this instance holds (called on its heartbeat). */
  renewLeases(): Promise<void>
  /** Stop this instance's use of the queue; its jobs stay locked until their lease lapses. */
  close(): Promise<void>
  /** Drop its connections at once (a close that cannot reach Redis). */
  disconnect(): Promise<void>
}
