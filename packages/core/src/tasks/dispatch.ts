/** Tasks across instances: where a submitted task runs, the shared and per-instance queues, and taking jobs when this instance has room. */
import type { RunnerControl } from '@berth/contract'
import type { Coordination, JobQueue, TakenJob } from '../coordination/port.js'
import type { ConcurrencySlots } from '../limits/concurrency.js'
import type { Logger } from '../ports/logger.js'
import type { OwnedCollection } from '../records/collection.js'
import type { WorkspaceRecord } from '../workspaces/workspaces.js'
import type { TaskEngine } from './engine.js'
import type { EventBus } from './event-bus.js'
import { ACTIVE, type TaskRecord } from './task.js'
import type { LocalCancel } from './cancel.js'
import type { Scheduler } from './scheduler.js'
import type { LocalSteer } from './steering.js'

/** The queue any instance takes new work from, and the one of follow-ups for one instance. */
export const SHARED_QUEUE = 'tasks'
/** The channel of requests to instances (cancel a task they run, or steer it). */
export const CONTROL_CHANNEL = 'task-control'

/** A cancel, a control line for a task's runner (a decision, an interrupt, a message), or a session's container to release. */
type ControlMessage =
  | { cancel: string; owner: string }
  | { steer: string; owner: string; control: RunnerControl }
  | { release: string; owner: string }

export const instanceQueue = (instanceId: string) =>
  `tasks.${instanceId.replace(/[^A-Za-z0-9_.-]/g, '_')}`.slice(0, 100)

export interface DispatchOptions {
  coordination: Coordination
  records: OwnedCollection<TaskRecord>
  slots: ConcurrencySlots
  /** This instance's queue: a task taken here goes on it. */
  scheduler: Scheduler
  bus: EventBus
  logger: Logger
  engine: TaskEngine | undefined
  /** Ends a redelivered job's task that was running on an instance that is gone. */
  lost: { takeOver(task: TaskRecord): Promise<void> }
  /** Cancels a task under way here when another instance asks. */
  cancels: Pick<LocalCancel, 'here'>
  /** Steers a task under way here when a caller on another instance asks. */
  steer: Pick<LocalSteer, 'here'>
  /** How often to look for jobs other instances added (default 500 ms). */
  pollMs?: number
  /** The sessions' containers held here: released when another instance asks (a session stopped there). */
  sessions?: { has(wsId: string): boolean; stop(owner: string, wsId: string): Promise<void> }
}

interface JobData {
  owner: string
}

/**
 * Decides where a submitted task runs and moves it there. With one instance alive, or room
 * here (the pool can take one more), it runs here as it always did; a follow-up of a session
 * whose container another live instance holds goes to that instance's queue; anything else
 * goes to the shared queue, from which every instance takes when it has room (its own
 * queue first). A taken job is acked when its task ends; a redelivered one (its taker
 * died) runs when its task is still queued, ends it when it was running, and is dropped
 * when it already ended.
 *
 * @example
 * ```ts
 * const where = await dispatch.placement(ws)
 * if (where === 'here') scheduler.enqueue(task); else await dispatch.send(where, task)
 * ```
 */
export class Dispatcher {
  private readonly shared: JobQueue<JobData>
  private readonly mine: JobQueue<JobData>
  private readonly held = new Map<string, { job: TakenJob<JobData>; queue: JobQueue<JobData> }>()
  private readonly queues = new Map<string, JobQueue<JobData>>()
  private readonly handedOff = new Map<string, () => void>()
  private timer: ReturnType<typeof setInterval> | null = null
  private offControl: (() => Promise<void>) | null = null
  private taking = false
  private again = false
  private closed = false

  constructor(private readonly o: DispatchOptions) {
    this.shared = o.coordination.queue<JobData>(SHARED_QUEUE)
    this.mine = o.coordination.queue<JobData>(instanceQueue(o.coordination.instanceId))
    o.scheduler.onWake(() => this.take())
    o.bus.subscribeAll((m) => {
      if (m.type !== 'task.status' || ACTIVE.includes(m.status)) return
      const held = this.held.get(m.task_id)
      if (!held) return
      this.held.delete(m.task_id)
      void held.queue.ack(held.job).catch(() => false)
    })
  }

  get instanceId(): string {
    return this.o.coordination.instanceId
  }

  /** Where a task of `ws` runs: `here`, or the name of the queue to put it on. */
  async placement(ws: WorkspaceRecord): Promise<'here' | string> {
    const me = this.instanceId
    const alive = await this.o.coordination.instances.alive()
    if (ws.container_id && ws.instance_id && ws.instance_id !== me && alive.includes(ws.instance_id))
      return instanceQueue(ws.instance_id)
    if (ws.container_id && ws.instance_id === me) return 'here'
    if (alive.filter((id) => id !== me).length === 0 || this.hasRoom()) return 'here'
    return SHARED_QUEUE
  }

  /** Put a stored task on a queue; its submitter stops renewing the slot once another instance took it. */
  async send(queue: string, task: TaskRecord): Promise<void> {
    if (!task.slot_pending) {
      const off = this.o.bus.subscribe(task.id, (m) => {
        if (m.type !== 'task.status' || m.status === 'queued') return
        this.forgetHandOff(task.id)
        if (!this.o.scheduler.isWanted(task.workspace_id)) this.o.slots.forget(task.profile_id, task.workspace_id)
      })
      this.handedOff.set(task.id, off)
    }
    await this.queueNamed(queue).add({
      id: task.id,
      owner: task.owner_id,
      priority: task.priority,
      payload: { owner: task.owner_id },
    })
    this.take()
  }

  /** Take a task waiting in a queue out of it (cancel); false when no queue had it waiting. */
  async cancel(task: TaskRecord): Promise<boolean> {
    this.forgetHandOff(task.id)
    if (await this.shared.cancel(task.id).catch(() => false)) return true
    for (const q of this.queues.values()) if (await q.cancel(task.id).catch(() => false)) return true
    return false
  }

  /** Ask the instance running a task to cancel it (every instance hears; the one with it acts). */
  async requestCancel(task: TaskRecord): Promise<void> {
    await this.o.coordination.pubsub.publish<ControlMessage>(CONTROL_CHANNEL, { cancel: task.id, owner: task.owner_id })
  }

  /** Ask the instance running a task to write `control` to its runner (or to interrupt it). */
  async requestControl(task: TaskRecord, control: RunnerControl): Promise<void> {
    await this.o.coordination.pubsub.publish<ControlMessage>(CONTROL_CHANNEL, {
      steer: task.id,
      owner: task.owner_id,
      control,
    })
  }

  /** Whether an instance is alive (it renews its lease on the coordination). */
  async isAlive(instanceId: string): Promise<boolean> {
    return (await this.o.coordination.instances.alive()).includes(instanceId)
  }

  /** Ask the instance holding a session's container to release it (its agent ended, files and conversation kept). */
  async requestRelease(owner: string, wsId: string): Promise<void> {
    await this.o.coordination.pubsub.publish<ControlMessage>(CONTROL_CHANNEL, { release: wsId, owner })
  }

  /** Look for jobs now and every `pollMs`; hear cancel, steering and release requests. */
  async start(): Promise<void> {
    this.offControl = await this.o.coordination.pubsub.subscribe<ControlMessage>(CONTROL_CHANNEL, (m) => {
      if ('release' in m) {
        if (!this.o.sessions?.has(m.release)) return
        void this.o.sessions
          .stop(m.owner, m.release)
          .catch((err) =>
            this.o.logger.warn('could not release a session', { workspace: m.release, error: String(err) }),
          )
        return
      }
      const id = 'cancel' in m ? m.cancel : m.steer
      if (!this.o.scheduler.has(id)) return
      void this.controlHere(m).catch((err) =>
        this.o.logger.warn('could not cancel or steer a task', { task: id, error: String(err) }),
      )
    })
    this.timer = setInterval(() => this.take(), this.o.pollMs ?? 500)
    this.timer.unref?.()
    this.take()
  }

  close(): void {
    this.closed = true
    if (this.timer) clearInterval(this.timer)
    void this.offControl?.().catch(() => {})
    for (const off of this.handedOff.values()) off()
    this.handedOff.clear()
  }

  /** Whether this instance's pool can take one more task. */
  private hasRoom(): boolean {
    const pool = this.o.engine?.pool
    if (!pool) return false
    return this.o.scheduler.load < pool.stats().max
  }

  /** Take jobs while there is room (this instance's own queue always: its containers are warm). */
  take(): void {
    if (this.closed || this.o.scheduler.closed || !this.o.engine) return
    // Out of reach or unleased: take nothing (and log nothing); the lease's return calls this again.
    const { reachable, leased } = this.o.coordination.state()
    if (!reachable || !leased) return
    if (this.taking) {
      this.again = true
      return
    }
    this.taking = true
    void (async () => {
      try {
        do {
          this.again = false
          for (;;) {
            if (this.closed || this.o.scheduler.closed) return
            let queue = this.mine
            let job = await this.mine.take()
            if (!job && this.hasRoom()) {
              queue = this.shared
              job = await queue.take()
            }
            if (!job) break
            await this.handle(job, queue)
          }
        } while (this.again)
      } catch (err) {
        if (!this.closed) this.o.logger.warn('could not take a task from the queue', { error: String(err) })
      } finally {
        this.taking = false
      }
    })()
  }

  private async handle(job: TakenJob<JobData>, queue: JobQueue<JobData>): Promise<void> {
    const task = await this.o.records.find(job.payload.owner, job.id)
    if (!task || !ACTIVE.includes(task.status)) {
      await queue.ack(job)
      return
    }
    const alive = await this.o.coordination.instances.alive()
    const elsewhere = task.instance_id && task.instance_id !== this.instanceId && alive.includes(task.instance_id)
    if (task.status === 'queued' && !elsewhere) {
      // A second job for a task held here (a rebuild put it back meanwhile): done with at once.
      // Held but no longer in the scheduler, it was fenced out (its old job went with the lease):
      // this job is the one it runs under now.
      if (this.held.has(task.id) && this.o.scheduler.has(task.id)) {
        await queue.ack(job)
        return
      }
      this.forgetHandOff(task.id)
      this.held.set(task.id, { job, queue })
      // Already queued here (recovered after a restart under the same id).
      if (this.o.scheduler.has(task.id)) return
      const mine = { ...task, instance_id: this.instanceId, takes: (task.takes ?? 0) + 1 }
      await this.o.records.put(mine)
      if (!task.slot_pending) this.o.slots.adopt(task.profile_id, task.workspace_id)
      this.o.scheduler.enqueue(mine)
      return
    }
    // Already taken by a live instance (a stale delivery), or it ran on one that is gone.
    if (!elsewhere && task.instance_id !== this.instanceId) await this.o.lost.takeOver(task)
    await queue.ack(job)
  }

  /** Another instance asks to cancel or steer a task held here. */
  private async controlHere(m: Exclude<ControlMessage, { release: string }>): Promise<void> {
    const t = await this.o.records.find(m.owner, 'cancel' in m ? m.cancel : m.steer)
    if (!t || !ACTIVE.includes(t.status)) return
    if ('cancel' in m) await this.o.cancels.here(t)
    else await this.o.steer.here(t, m.control)
  }

  private forgetHandOff(taskId: string): void {
    this.handedOff.get(taskId)?.()
    this.handedOff.delete(taskId)
  }

  private queueNamed(name: string): JobQueue<JobData> {
    if (name === SHARED_QUEUE) return this.shared
    if (name === this.mine.name) return this.mine
    const q = this.queues.get(name) ?? this.o.coordination.queue<JobData>(name)
    this.queues.set(name, q)
    return q
  }
}
