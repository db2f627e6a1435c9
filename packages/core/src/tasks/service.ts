/** TasksService: what the routes, the socket and other services call (submit, read, cancel, start, close). */
import { memoryCoordination } from '../coordination/memory.js'
import type { Coordination } from '../coordination/port.js'
import { requireCoordination } from '../coordination/unavailable.js'
import { Fencing } from './fencing.js'
import { assertFitsMemory, sessionWorkspace, takeSlot } from './admission.js'
import {
  newId,
  validationError,
  type SubmitTask,
  type SubmittedTask,
  type Task,
  type TaskStatus,
  type TaskWaiting,
  type TranscriptEvent,
} from '@berth/contract'
import { isoNow } from '../ports/clock.js'
import { noopMetrics } from '../ports/metrics.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type Page, type Paged } from '../records/collection.js'
import { term } from '../records/indexes.js'
import { LocalCancel, REMOTE_CANCEL_WAIT_MS, TaskCancelled } from './cancel.js'
import { Conversations } from './conversation.js'
import { Dispatcher } from './dispatch.js'
import { requireEngine } from './engine.js'
import { RemoteEvents } from './event-bus.js'
import { ACTIVE, TaskStates, taskView, type TaskRecord } from './task.js'
import { LostInstances } from './lost-instances.js'
import { recover } from './recovery.js'
import { TaskRuns } from './run.js'
import { Approvals } from './approvals.js'
import { TaskSteering } from './steer.js'
import { LocalSteer, RunControls } from './steering.js'
import { Scheduler } from './scheduler.js'
import { TaskRebuild } from './rebuild.js'
import { SessionContainers } from './session-containers.js'
import { IdleYield } from './idle-yield.js'
import { Transcript } from './transcript.js'
import type { TasksOptions } from './service-options.js'
import { taskDuration } from './time-limit.js'
import { traced, traceparentOf } from '../tracing.js'
import type { Span } from '@opentelemetry/api'

/**
 * Tasks: submission (validation, per-profile concurrency), a persistent queue, execution
 * in pooled containers through the runner, results and limit errors, cancel, and recovery
 * after a restart. The parts live beside this file: the {@link TaskStates} (the moves of
 * a task), the {@link Scheduler} (this instance's queue), the {@link SessionContainers},
 * the {@link TaskRuns}, the {@link Dispatcher} (other instances) and {@link recover}.
 *
 * Batch tasks get a fresh workspace and container, reaped when they end. Session tasks
 * keep their container warm; a follow-up with the `session_id` runs in it and resumes the
 * conversation, queued behind a prompt still running in the same session. After
 * `sessionIdleMs` the container is released (the workspace goes `idle`); a later follow-up
 * claims a new one, with the workspace's volume when the profile has persistent sessions.
 *
 * @example
 * ```ts
 * const { task_id } = await tasks.submit(ownerId, { mode: 'batch', profile_id, prompt: 'Summarise README.md' })
 * const task = await tasks.get(ownerId, task_id) // poll until completed | failed | cancelled
 * ```
 */
export class TasksService {
  readonly records: OwnedCollection<TaskRecord>
  private readonly transcript: Transcript
  private readonly states: TaskStates
  private readonly scheduler: Scheduler
  /** The workspaces' containers held here (and their living agents). */
  readonly containers: SessionContainers
  private readonly room: IdleYield
  private readonly cancels: LocalCancel
  private readonly coordination: Coordination
  readonly dispatch: Dispatcher
  private readonly lost: LostInstances
  private readonly remote: RemoteEvents
  /** Puts back what the coordination lost about tasks, from the store. */
  readonly rebuilder: TaskRebuild
  private readonly fencing: Fencing
  /** Decisions on permission requests, interrupts and messages of tasks under way. */
  readonly steer: TaskSteering

  constructor(private readonly o: TasksOptions) {
    const { store, clock, logger, eventLog, bus, engine, workspaces, slots, callers } = o
    const coordination = o.coordination ?? memoryCoordination({ clock })
    const records = new OwnedCollection<TaskRecord>(store, 'tasks', 'task')
    const events = new Transcript(eventLog, bus)
    const metrics = o.metrics ?? noopMetrics
    const states = new TaskStates({ records, store, clock, bus, eventLog, events, metrics })
    const mark = (t: TaskRecord, waiting: TaskWaiting) => states.markWaiting(t, waiting)
    const scheduler = new Scheduler({ slots, callers, mark, logger, clock, metrics })
    const controls = new RunControls()
    const approvals = new Approvals({ store, clock, once: o.once ?? coordination.once })
    const containers = new SessionContainers({
      engine,
      workspaces,
      environments: o.environments,
      catalog: o.catalog,
      slots,
      callers,
      scheduler,
      conversations: new Conversations(store, logger),
      logger,
      sessionIdleMs: o.sessionIdleMs,
      snapshots: o.snapshots,
      store,
    })
    const room = new IdleYield({ containers, coordination, shared: slots.isShared, engine, bus, metrics, logger })
    scheduler.serve(
      new TaskRuns({
        instanceId: coordination.instanceId,
        engine,
        clock,
        logger,
        metrics,
        workspaces,
        profiles: o.profiles,
        catalog: o.catalog,
        containers,
        room,
        states,
        events,
        scheduler,
        controls,
        approvals,
        usage: o.usage,
        checkpoints: o.checkpoints,
      }),
    )
    const cancels = new LocalCancel({ records, states, scheduler, containers, bus })
    const local = new LocalSteer({ controls, scheduler, cancels })
    // Several instances: the shared queue, lost instances' tasks, live messages (see docs/COORDINATION.md).
    const lost = new LostInstances({
      coordination,
      store,
      records,
      states,
      slots,
      callers,
      workspaces,
      logger,
      graceMs: o.recoveryGraceMs,
      once: o.once,
    })
    this.dispatch = new Dispatcher({
      coordination,
      records,
      slots,
      scheduler,
      bus,
      logger,
      engine,
      lost,
      cancels,
      steer: local,
      sessions: containers,
    })
    this.steer = new TaskSteering({
      instanceId: coordination.instanceId,
      records,
      approvals,
      local,
      cancels,
      scheduler,
      dispatch: this.dispatch,
      once: o.once ?? coordination.once,
      audit: o.audit,
    })
    // Lease lost: stop driving tasks before a survivor takes them over (docs/COORDINATION.md).
    this.fencing = new Fencing({ coordination, scheduler, records, lost, logger, resumed: () => this.dispatch.take() })
    this.remote = new RemoteEvents({ coordination, bus, eventLog, logger })
    this.rebuilder = new TaskRebuild({ coordination, store, clock, records, scheduler, slots, callers, workspaces })
    this.coordination = coordination
    this.records = records
    this.transcript = events
    this.states = states
    this.scheduler = scheduler
    this.containers = containers
    this.room = room
    this.cancels = cancels
    this.lost = lost
  }

  /** The store tasks live in (for records that belong with them, e.g. WebSocket request ids). */
  get recordsStore(): Store {
    return this.o.store
  }

  view(r: TaskRecord): Task {
    return taskView(r)
  }

  /**
   * Validate, take a concurrency slot when a workspace would start, persist, queue.
   * `opts.workspace` names the new workspace's session id and name (playbook runs start
   * `pb-…` sessions); it needs a `session` task without `session_id`.
   */
  async submit(
    owner: string,
    input: SubmitTask,
    opts: { workspace?: { session_id: string; name: string }; queueWhenFull?: boolean } = {},
  ): Promise<SubmittedTask> {
    // The task's trace begins here (under the request's span when there is one).
    const attributes = {
      'berth.task.mode': input.mode,
      'berth.profile.id': input.profile_id,
      'berth.instance.id': this.coordination.instanceId,
    }
    return traced('task.submit', attributes, (span) => this.admit(owner, input, opts, span))
  }

  private async admit(
    owner: string,
    input: SubmitTask,
    opts: { workspace?: { session_id: string; name: string }; queueWhenFull?: boolean },
    span: Span,
  ): Promise<SubmittedTask> {
    requireEngine(this.o.engine)
    this.assertAccepting()
    const profile = await this.o.profiles.records.find(owner, input.profile_id)
    if (!profile)
      throw validationError([
        { location: 'body', path: 'profile_id', message: `profile ${input.profile_id} does not exist` },
      ])
    await this.o.environments.assertRunnable(owner, profile.environment_id)
    await this.o.usage?.budgets.assertWithin(owner, profile)
    // Refused before a slot or a workspace is taken: a bad limit changes nothing.
    const maxDurationS = taskDuration(input.max_duration_s, this.o.timeLimit)
    let ws = await sessionWorkspace(this.o.workspaces, owner, input, profile)
    await assertFitsMemory(this.o.engine, this.o.environments, owner, profile)
    const wsId = ws?.id ?? newId('workspace')
    // A new or idle workspace takes a slot now, synchronously: parallel submits stop exactly at the limit.
    const deps = { slots: this.o.slots, room: this.room, records: this.records, clock: this.o.clock }
    const slot = await takeSlot(deps, { owner, profileId: profile.id, wsId, queueWhenFull: opts.queueWhenFull })
    try {
      ws ??= await this.o.workspaces.create(owner, {
        id: wsId,
        profile_id: profile.id,
        persistent: profile.persistent_sessions,
        ...opts.workspace,
      })
      // Here, or on a queue another instance takes it from (a session's follow-up: its container's).
      const where = await this.dispatch.placement(ws)
      const now = isoNow(this.o.clock)
      const record: TaskRecord = {
        id: newId('task'),
        owner_id: owner,
        mode: input.mode,
        profile_id: profile.id,
        prompt: input.prompt,
        priority: input.priority ?? 'normal',
        workspace_id: ws.id,
        session_id: ws.session_id,
        allowed_tools: input.allowed_tools ?? null,
        max_turns: input.max_turns ?? null,
        max_budget_usd: input.max_budget_usd ?? null,
        max_duration_s: maxDurationS,
        require_approval: input.require_approval ?? null,
        approval_timeout_s: input.approval_timeout_s ?? null,
        ...(input.output_schema && { output_schema: input.output_schema }),
        status: 'queued',
        started_at: null,
        finished_at: null,
        result: null,
        error: null,
        ...(slot.pending && { slot_pending: true }),
        instance_id: where === 'here' ? this.coordination.instanceId : null,
        trace: traceparentOf(span),
        created_at: now,
        updated_at: now,
      }
      span.setAttribute('berth.task.id', record.id)
      await this.states.open(record)
      if (where === 'here') this.scheduler.enqueue(record)
      if (where !== 'here') await this.dispatch.send(where, record)
      const { id: task_id, status, created_at, mode, session_id, workspace_id } = record
      return { task_id, status, created_at, session_id: mode === 'session' ? session_id : null, workspace_id }
    } catch (err) {
      slot.undo()
      throw err
    }
  }

  /**
   * Throws 503 SERVICE_UNAVAILABLE (with `Retry-After`) while this instance cannot take new
   * tasks: the coordination backend is out of reach or its lease lapsed. Checked before a
   * submit changes anything, so a refused submit leaves nothing behind.
   */
  assertAccepting(): void {
    requireCoordination(this.coordination, 'Tasks cannot be submitted')
  }

  async get(owner: string, id: string): Promise<Task> {
    return taskView(await this.records.get(owner, id))
  }

  async list(
    owner: string,
    page: Page,
    filter: { status?: TaskStatus | undefined; mode?: 'batch' | 'session' | undefined },
  ): Promise<Paged<Task>> {
    const { items, total, next } = await this.records.list(
      owner,
      page,
      term({ status: filter.status, mode: filter.mode }),
    )
    return { items: items.map(taskView), total, next }
  }

  /**
   * A page of a task's own events from its workspace's log (`seq` is the workspace's) and
   * how many it has: counted as they are recorded, so the total never reads the log.
   */
  async events(
    owner: string,
    id: string,
    after: number,
    limit: number,
  ): Promise<{ events: TranscriptEvent[]; total: number }> {
    return this.transcript.page(await this.records.get(owner, id), after, limit)
  }

  /** Cancel a queued or running task; a task already done is returned unchanged. */
  async cancel(owner: string, id: string): Promise<Task> {
    const t = await this.records.get(owner, id)
    await this.steer.recordStop('task.cancelled', t)
    if (!ACTIVE.includes(t.status)) return taskView(t)
    const here = t.instance_id === this.coordination.instanceId
    if (this.scheduler.dequeue(id) || (!here && (await this.dispatch.cancel(t)))) {
      // A waiting reason being written is written before the end (never over it).
      await this.scheduler.settled(id)
      return taskView(await this.cancels.ended(t))
    }
    if (!(await this.scheduler.abort(id, new TaskCancelled(id))) && t.instance_id && !here) {
      // Under way on another instance: it stops the run; the answer waits a while for the
      // task's end to arrive on the bus (other instances' messages are delivered to it).
      const wait = this.cancels.endOf(t, REMOTE_CANCEL_WAIT_MS)
      await this.dispatch.requestCancel(t)
      // Ended before the wait began listening: nothing more will come.
      const now = await this.records.get(owner, id)
      if (!ACTIVE.includes(now.status)) {
        wait.stop()
        return taskView(now)
      }
      return wait.ended
    }
    return taskView(await this.records.get(owner, id))
  }

  /** Start serving: recover what a previous run left, then run the queue. */
  async start(): Promise<void> {
    await this.recover()
    await this.remote.start()
    await this.room.start()
    await this.dispatch.start()
    this.lost.start()
  }

  /** Cancel everything of a workspace and release it (workspace deletion). */
  async stopWorkspace(owner: string, wsId: string): Promise<void> {
    const { queued, running } = this.scheduler.tasksOf(wsId)
    for (const id of queued) await this.cancel(owner, id)
    for (const id of running) await this.scheduler.abort(id, new TaskCancelled(id))
    await this.containers.release(owner, wsId)
  }

  /** After a restart: bring what a previous process left under way to a definite state (see {@link recover}). */
  async recover(): Promise<void> {
    const { store, engine, logger, slots, workspaces, recoveryGraceMs, usage, clock } = this.o
    const parts = {
      usage: usage && { ...usage, clock },
      containers: this.containers,
      states: this.states,
      events: this.transcript,
      scheduler: this.scheduler,
      coordination: this.coordination,
      once: this.o.once,
    }
    await recover({ store, records: this.records, engine, logger, slots, workspaces, recoveryGraceMs, ...parts })
  }

  /** Stop taking work; running tasks are left to recovery. `releaseSessions`: idle warm sessions go first (`local`). */
  async close(opts: { releaseSessions?: boolean } = {}): Promise<void> {
    this.scheduler.close()
    this.dispatch.close()
    this.fencing.close()
    this.lost.close()
    this.o.slots.close()
    this.o.callers?.close()
    await this.remote.close()
    await this.room.close()
    if (opts.releaseSessions) await this.containers.releaseIdleSessions()
    this.containers.close()
    await this.o.engine?.warmAgents?.close()
    await this.o.eventLog.flushAll()
  }
}
