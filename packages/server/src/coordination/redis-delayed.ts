import { checkQueueName, type DelayedJobs, type DueJob } from '@berth/core'
import { Queue, Worker, type ConnectionOptions } from 'bullmq'
import { bullId } from './redis-queue.js'

/** Options of {@link redisDelayed}. */
export interface RedisDelayedOptions {
  connection: ConnectionOptions
  /** BullMQ's key prefix for delayed jobs (`<prefix>d`). */
  bullPrefix: string
  leaseMs: number
  /** Jobs one instance runs at once per queue (default 8). */
  concurrency?: number
  /** Told of handlers that throw. */
  onError?: (err: unknown) => void
  /** Told of connection errors (default: `onError`). */
  onConnectionError?: (err: unknown) => void
}

/**
 * Delayed jobs on BullMQ: `schedule` adds a job with a delay (BullMQ's delayed set), each
 * processing instance runs a BullMQ worker, and BullMQ moves a due job to exactly one of them.
 * An instance that dies mid-job: the job runs again elsewhere after its lease (at least once).
 *
 * @example
 * ```ts
 * const delayed = redisDelayed({ connection, bullPrefix: 'berth:d', leaseMs: 30_000 })
 * await delayed.schedule('webhooks', 'dlv_1:2', Date.now() + 5000, { attempt: 2 })
 * ```
 */
export function redisDelayed(
  opts: RedisDelayedOptions,
): DelayedJobs & { close(): Promise<void>; disconnect(): Promise<void> } {
  const base = { connection: opts.connection, prefix: opts.bullPrefix }
  const connectionError = opts.onConnectionError ?? opts.onError ?? (() => {})
  const queues = new Map<string, Queue>()
  const workers = new Set<Worker>()
  const queueOf = (name: string) => {
    let q = queues.get(checkQueueName(name))
    if (!q) {
      q = new Queue(name, base)
      // BullMQ re-emits its connection's errors: unheard, an 'error' event would throw.
      q.on('error', connectionError)
      queues.set(name, q)
    }
    return q
  }

  return {
    async schedule(queue, id, runAt, payload) {
      // BullMQ ignores an add whose job id exists: a pending id is scheduled once.
      await queueOf(queue).add(
        'due',
        { id, runAt, payload },
        { jobId: bullId(id), delay: Math.max(0, runAt - Date.now()), removeOnComplete: true, removeOnFail: true },
      )
    },
    async cancel(queue, id) {
      // BullMQ's remove answers 1 for a missing job too, and 0 for a running (locked) one.
      const q = queueOf(queue)
      return !!(await q.getJob(bullId(id))) && (await q.remove(bullId(id))) === 1
    },
    async process(queue, handler) {
      checkQueueName(queue)
      const worker = new Worker(
        queue,
        async (job) => {
          const { id, runAt, payload } = job.data as { id: string; runAt: number; payload: unknown }
          await handler({ id, queue, runAt, payload } as DueJob<never>)
        },
        {
          ...base,
          concurrency: opts.concurrency ?? 8,
          lockDuration: opts.leaseMs,
          stalledInterval: Math.max(50, Math.floor(opts.leaseMs / 2)),
          maxStalledCount: 1_000_000,
        },
      )
      worker.on('error', connectionError)
      worker.on('failed', (_job, err) => opts.onError?.(err))
      workers.add(worker)
      await worker.waitUntilReady()
      return async () => {
        workers.delete(worker)
        await worker.close()
      }
    },
    async close() {
      for (const w of workers) await w.close(true)
      workers.clear()
      for (const q of queues.values()) await q.close()
      queues.clear()
    },
    async disconnect() {
      for (const w of workers) await w.disconnect()
      workers.clear()
      for (const q of queues.values()) await q.disconnect()
      queues.clear()
    },
  }
}
