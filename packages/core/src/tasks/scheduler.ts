/** This instance's queue and its dispatch: the order queued tasks start in, their concurrency slots, their runs tracked. */
import type { TaskWaiting } from '@berth/contract'
import type { CallerCaps } from '../limits/caller-caps.js'
import type { ConcurrencySlots } from '../limits/concurrency.js'
import type { Logger } from '../ports/logger.js'
import { systemClock, type Clock } from '../ports/clock.js'
import { secondsSince, type Metrics } from '../ports/metrics.js'
import type { TaskRecord } from './task.js'

/** How long a run refused a shared slot (or its caller's cap) waits before asking again. */
const SHARED_SLOT_RETRY_MS = 1_000

/** What the queue order looks at in a queued task. */
export type QueuedTask = Pick<TaskRecord, 'id' | 'owner_id' | 'workspace_id' | 'priority' | 'created_at'>

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
export function nextQueued<T extends QueuedTask>(
  queue: readonly T[],
  runningOwners: Iterable<string>,
  ready: (t: T) => boolean,
): number {
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

/** What the scheduler starts tasks with. */
export interface TaskRunner {
  /** Run one task end to end; never throws (every path ends the task). */
  run(task: TaskRecord, signal: AbortSignal): Promise<void>
  /** A task waits for a slot of `profileId` that an idle session may hold: free one. Whether one is being freed. */
  makeRoom(profileId: string, owner: string): boolean
  /** A task waits for its caller's cap that an idle session of the caller may hold: free one. Whether one is being freed. */
  makeRoomFor?(owner: string): boolean
  /** Looked at the queue: tasks' claims may wait for room in the pool (memory, `max`) that an idle session holds. */
  makeRoomInPool?(): void
}

export interface SchedulerOptions {
  slots: ConcurrencySlots
  /** Per-caller caps: a task whose caller is at its cap waits, and other callers' tasks go first (default none). */
  callers?: CallerCaps | undefined
  /** Record why a queued task waits (written with the task; the run awaits it before its first move). */
  mark?: (task: TaskRecord, waiting: TaskWaiting) => Promise<unknown>
  logger: Logger
  /** Where starts and the queue's depth are observed, timed by `clock` (default none). */
  metrics?: Metrics
  clock?: Clock
}

/** A task being run, and how to stop it. */
interface Running {
  task: TaskRecord
  abort: AbortController
  done: Promise<void>
}

/**
 * This instance's work: the queue, the workspaces with a task under way, the runs in
 * flight, and whether it still takes work. It starts every queued task whose workspace is
 * free (one task per workspace at a time), in the order of {@link nextQueued}; a task
 * queued without a slot (playbook runs) starts once its profile has one, and an idle
 * session of that profile is released to make one. The pool orders the waits for
 * containers. Nothing starts before {@link Scheduler.serve} hands it a runner.
 *
 * @example
 * ```ts
 * const scheduler = new Scheduler({ slots, logger })
 * scheduler.serve({ run: (task, signal) => runs.run(task, signal), makeRoom: () => false })
 * scheduler.enqueue(record)
 * ```
 */
export class Scheduler {
  private readonly queue: TaskRecord[] = []
  /** Workspaces with a task under way → their owner. */
  private readonly busy = new Map<string, string>()
  private readonly running = new Map<string, Running>()
  private readonly wakers: (() => void)[] = []
  /** Workspaces asking for their caller's slot (or a shared profile slot) → their task. */
  private readonly admitting = new Map<string, TaskRecord>()
  /** How many times this instance was fenced: an admission answered after a fence drops its task. */
  private fences = 0
  /** Writes of a queued task's waiting reason under way, by task id. */
  private readonly marks = new Map<string, Promise<unknown>>()
  private runner: TaskRunner | null = null
  private retry: ReturnType<typeof setTimeout> | null = null
  private closedFlag = false

  constructor(private readonly o: SchedulerOptions) {
    o.metrics?.watchQueue(() => this.queue.length)
  }

  /**
   * Start running tasks with `runner` (once). The runs need the scheduler's answers (is a
   * workspace still wanted?), so the runner is built after it and handed over here, the
   * way a server is handed its handler when it starts listening.
   */
  serve(runner: TaskRunner): void {
    if (this.runner) throw new Error('scheduler: already serving')
    this.runner = runner
    this.wake()
  }

  /** Queue a task; it starts after the current step when it may. */
  enqueue(task: TaskRecord): void {
    this.queue.push(task)
    this.wake()
  }

  /** Take a queued task out of the queue; false when it is not queued. */
  dequeue(taskId: string): boolean {
    const index = this.queue.findIndex((q) => q.id === taskId)
    if (index < 0) return false
    this.queue.splice(index, 1)
    return true
  }

  /** Stop a running task and wait for its run to end it; false when it is not running. */
  async abort(taskId: string, reason?: unknown): Promise<boolean> {
    const run = this.running.get(taskId)
    if (!run) return false
    run.abort.abort(reason)
    await run.done
    return true
  }

  /** Whether the task is queued or running here. */
  has(taskId: string): boolean {
    return this.running.has(taskId) || this.queue.some((t) => t.id === taskId)
  }

  /** The ids of the workspace's tasks: queued, then running. */
  tasksOf(wsId: string): { queued: string[]; running: string[] } {
    const running = [...this.running.values()].filter((r) => r.task.workspace_id === wsId).map((r) => r.task.id)
    return { queued: this.queue.filter((t) => t.workspace_id === wsId).map((t) => t.id), running }
  }

  /** Whether a task of the workspace waits in the queue. */
  isQueued(wsId: string): boolean {
    return this.queue.some((t) => t.workspace_id === wsId)
  }

  /** Whether a task of the workspace is under way (starting, running, or asking for its shared slot). */
  isBusy(wsId: string): boolean {
    return this.busy.has(wsId)
  }

  /** Whether the workspace has a task under way or waiting. */
  isWanted(wsId: string): boolean {
    return this.isBusy(wsId) || this.isQueued(wsId)
  }

  /**
   * Workspaces under way and tasks waiting: what this instance has taken on. Tasks held back
   * by their caller's cap do not count: they must not keep other callers' tasks from being
   * taken here.
   */
  get load(): number {
    let held = 0
    for (const t of this.queue) if (t.waiting?.reason === 'caller_cap' || !this.callerFree(t)) held++
    return this.busy.size + this.queue.length - held
  }

  get closed(): boolean {
    return this.closedFlag
  }

  /** Stop starting tasks; runs under way go on (a restart's recovery finishes them). */
  close(): void {
    this.closedFlag = true
    if (this.retry) clearTimeout(this.retry)
    this.retry = null
  }

  /**
   * This instance lost its lease: empty the queue and abort every run with `reason` (not
   * waited for). Returns the tasks dropped, queued and running; tasks queued later start as usual.
   */
  fence(reason: unknown): TaskRecord[] {
    const queued = [...this.queue.splice(0), ...this.admitting.values()]
    this.fences++
    for (const run of this.running.values()) run.abort.abort(reason)
    return [...queued, ...[...this.running.values()].map((r) => r.task)]
  }

  /** Call `fn` whenever the scheduler looks at its queue again (a slot or a workspace freed). */
  onWake(fn: () => void): void {
    this.wakers.push(fn)
  }

  /** Look at the queue again, after the current step. */
  wake(): void {
    queueMicrotask(() => {
      this.pump()
      for (const fn of this.wakers) fn()
    })
  }

  /** Start every queued task that may start now. */
  pump(): void {
    const { slots } = this.o
    if (this.closedFlag || !this.runner) return
    for (let i = this.nextIndex(); i >= 0; i = this.nextIndex()) {
      const task = this.queue.splice(i, 1)[0]!
      if ((task.slot_pending && slots.isShared) || this.needsCallerSlot(task)) {
        this.admit(task)
        continue
      }
      if (task.slot_pending) {
        slots.acquire(task.profile_id, task.workspace_id)
        delete task.slot_pending
      }
      this.start(task)
    }
  }

  /** Whether the task's workspace still has to take its caller's slot (a warm session holds one already). */
  private needsCallerSlot(task: TaskRecord): boolean {
    const callers = this.o.callers
    return callers !== undefined && !callers.has(task.owner_id, task.workspace_id)
  }

  /**
   * A run that must ask before it starts: for its caller's slot (the caller's cap, counted
   * over every instance) and, when instances share the slots, for its profile's slot (this
   * instance cannot know they are free). The workspace stays reserved meanwhile; refused,
   * the run goes back to the queue (another caller's task may start first), its reason is
   * recorded on the task, and it asks again after {@link SHARED_SLOT_RETRY_MS} or when a slot frees.
   */
  private admit(task: TaskRecord): void {
    const { slots, callers } = this.o
    this.busy.set(task.workspace_id, task.owner_id)
    this.admitting.set(task.workspace_id, task)
    const fences = this.fences
    // Whether this admission took the caller's slot (a warm session's workspace holds one already).
    let tookCaller = false
    const ask = async (): Promise<'caller_cap' | 'slot' | null> => {
      if (this.needsCallerSlot(task)) {
        if (!(await callers!.tryTake(task.owner_id, task.workspace_id))) return 'caller_cap'
        tookCaller = true
      }
      if (task.slot_pending && slots.isShared && !(await slots.tryTake(task.profile_id, task.workspace_id)))
        return 'slot'
      // In one process the profile's slot is counted here; it may have gone while the caller's was asked for.
      if (task.slot_pending && !slots.isShared && !this.slotFree(task)) return 'slot'
      return null
    }
    void ask()
      .catch((err: unknown) => {
        this.o.logger.warn('could not ask the shared slots; retrying', { task: task.id, error: String(err) })
        return 'slot' as const
      })
      .then((asked) => {
        this.busy.delete(task.workspace_id)
        this.admitting.delete(task.workspace_id)
        // In one process the profile's slot is taken now, synchronously: another admission may
        // have taken the last one while this one awaited the caller's slot.
        const refused = !asked && task.slot_pending && !slots.isShared && !this.slotFree(task) ? 'slot' : asked
        // Fenced meanwhile: the task was handed to the takeover with the queue; give back what was taken.
        const fenced = fences !== this.fences
        if (!refused && !this.closedFlag && !fenced) {
          if (task.slot_pending && !slots.isShared) slots.acquire(task.profile_id, task.workspace_id)
          delete task.slot_pending
          return this.start(task)
        }
        // Refused, or closed meanwhile: give back what this admission took, and wait in the queue.
        if (tookCaller) callers!.release(task.owner_id, task.workspace_id)
        if (!refused && task.slot_pending && slots.isShared) slots.release(task.profile_id, task.workspace_id)
        if (fenced) return
        this.queue.unshift(task)
        if (refused === 'caller_cap') this.markWaiting(task, 'caller_cap', this.o.callers!.describe(task.owner_id))
        // What was refused may be held by an idle session, on any instance: it yields.
        if (refused === 'caller_cap') this.runner!.makeRoomFor?.(task.owner_id)
        else if (refused === 'slot' && task.slot_pending) this.runner!.makeRoom(task.profile_id, task.owner_id)
        this.retryLater()
      })
  }

  private retryLater(): void {
    if (this.retry || this.closedFlag) return
    this.retry = setTimeout(() => {
      this.retry = null
      this.pump()
    }, SHARED_SLOT_RETRY_MS)
    this.retry.unref?.()
  }

  /** Record why a queued task waits, once per reason; the run's first move waits for the write. */
  markWaiting(task: TaskRecord, reason: TaskWaiting['reason'], message: string): void {
    if (!this.o.mark || task.waiting?.reason === reason) return
    task.waiting = { reason, message }
    const before = this.marks.get(task.id) ?? Promise.resolve()
    const write = before
      .then(() => this.o.mark!(task, { reason, message }))
      .catch((err: unknown) =>
        this.o.logger.warn('could not record why a task waits', { task: task.id, error: String(err) }),
      )
    this.marks.set(task.id, write)
    void write.finally(() => {
      if (this.marks.get(task.id) === write) this.marks.delete(task.id)
    })
  }

  /** Writes of the task's waiting reason still under way, finished (before its end or first move is written). */
  async settled(taskId: string): Promise<void> {
    await this.marks.get(taskId)
  }

  private start(task: TaskRecord): void {
    this.busy.set(task.workspace_id, task.owner_id)
    const now = (this.o.clock ?? systemClock).now()
    this.o.metrics?.taskStarted({ mode: task.mode, queuedSeconds: secondsSince(task.created_at, now) })
    const abort = new AbortController()
    // Its moves are written after the waiting reason (never overwritten by it); they drop it.
    delete task.waiting
    const done = this.settled(task.id)
      .then(() => this.runner!.run(task, abort.signal))
      .catch((err) => this.o.logger.error('task run failed unexpectedly', { task: task.id, error: String(err) }))
      .finally(() => {
        this.running.delete(task.id)
        this.busy.delete(task.workspace_id)
        this.pump()
      })
    this.running.set(task.id, { task, abort, done })
  }

  /** The next task to start: its workspace free and, for a task waiting for a slot, a slot free. */
  private nextIndex(): number {
    const { queue, busy } = this
    const index = nextQueued(
      queue,
      busy.values(),
      (t) => !busy.has(t.workspace_id) && (!t.slot_pending || this.slotFree(t)) && this.callerFree(t),
    )
    if (index < 0) this.makeRoom()
    return index
  }

  /** Whether the task's caller may hold one more workspace, as this instance counts (its slot decides). */
  private callerFree(t: TaskRecord): boolean {
    const callers = this.o.callers
    if (!callers || callers.has(t.owner_id, t.workspace_id)) return true
    let asking = 0
    for (const a of this.admitting.values()) if (a.owner_id === t.owner_id) asking++
    return callers.running(t.owner_id) + asking < callers.limitOf(t.owner_id)
  }

  private slotFree(t: TaskRecord): boolean {
    const { slots } = this.o
    return slots.has(t.profile_id, t.workspace_id) || slots.running(t.profile_id) < slots.limit
  }

  /** Tasks waiting for a slot (or for room in the pool) that a warm but idle session holds: release one such session. */
  private makeRoom(): void {
    this.runner!.makeRoomInPool?.()
    for (const t of this.queue)
      if (!this.busy.has(t.workspace_id) && !this.callerFree(t))
        this.markWaiting(t, 'caller_cap', this.o.callers!.describe(t.owner_id))
    for (const t of this.queue) {
      if (!this.callerFree(t)) {
        if (this.runner!.makeRoomFor?.(t.owner_id)) return
        continue
      }
      if (!t.slot_pending || this.slotFree(t)) continue
      if (this.runner!.makeRoom(t.profile_id, t.owner_id)) return
    }
  }
}
