/** One task run end to end: its plan loaded once, its container leased, its moves, the runner's events and result, the container kept warm or released. */
import { ApiError, DEFAULT_APPROVAL_TIMEOUT_S, isApiError, type RunnerEvent, type RunnerInput } from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import { noopMetrics, secondsFrom, secondsSince, type Metrics } from '../ports/metrics.js'
import type { ProfileRecord, ProfilesService } from '../resources/profiles.js'
import type { Lease } from '../runtime/index.js'
import type { Checkpoints } from '../workspaces/checkpoints.js'
import type { WorkspaceRecord, WorkspacesService } from '../workspaces/workspaces.js'
import { requireEngine, type Claimed, type RunPlan, type TaskEngine } from './engine.js'
import { canLive, livingKey, type AgentProcess } from './agent-process.js'
import { materialize, meteredBy, type MaterializeDeps } from './materialize.js'
import type { Approvals } from './approvals.js'
import {
  endOf,
  errorOf,
  INTERRUPTED_END,
  type ResultEvent,
  type TaskEnd,
  type TaskRecord,
  type TaskStates,
} from './task.js'
import { runnerEvents } from './runner-session.js'
import { RunTrace } from './run-trace.js'
import type { Scheduler, TaskRunner } from './scheduler.js'
import type { SessionContainers } from './session-containers.js'
import type { IdleYield } from './idle-yield.js'
import { TaskInterrupted, type RunControls } from './steering.js'
import { RunTimeLimit } from './time-limit.js'
import { TaskFenced } from './fencing.js'
import type { Transcript } from './transcript.js'
import type { Usage } from '../usage/budgets.js'
import { settleUsage } from '../usage/task-end.js'

export interface TaskRunsOptions {
  /** This instance (recorded on the workspace whose container it holds). */
  instanceId?: string
  engine: TaskEngine | undefined
  clock: Clock
  logger: Logger
  /** Where the runner's start and the first token are observed (default none). */
  metrics?: Metrics
  profiles: ProfilesService
  workspaces: WorkspacesService
  catalog: MaterializeDeps
  containers: SessionContainers
  /** Idle sessions that yield to the tasks waiting for what they hold. */
  room: IdleYield
  states: TaskStates
  events: Transcript
  scheduler: Scheduler
  /** Where a run's control lines are written from (decisions, interrupts, messages). */
  controls: RunControls
  /** The permission requests runners write. */
  approvals: Approvals
  /** Where the task's usage is recorded and its metered figures read from; a run cut at a limit ends BUDGET_EXCEEDED. */
  usage?: Usage | undefined
  /** Keeps a session task's files and conversation when it ends, before its container is kept or released (default none). */
  checkpoints?: Pick<Checkpoints, 'keep'> | undefined
}

/**
 * Runs a task: loads its plan (task, workspace, profile) once, leases its workspace's
 * container, moves it to `starting` then `running`, resolves the runner's input once,
 * records the runner's events in order and ends the task with its result, a limit error,
 * CONTAINER_FAILED, or `cancelled` when its signal aborts. While the runner runs, its
 * stdin takes control lines ({@link RunControls}) and its permission requests are stored
 * (and counted on the task) before anyone sees them. A session keeps its container
 * warm for the follow-up; a batch task's, or one that failed, is released.
 *
 * @example
 * ```ts
 * const runs = new TaskRuns({ engine, clock, logger, profiles, workspaces, catalog, containers, states, events, scheduler })
 * scheduler.serve(runs)
 * ```
 */
export class TaskRuns implements TaskRunner {
  constructor(private readonly o: TaskRunsOptions) {}

  makeRoom(profileId: string): boolean {
    return this.o.room.forSlot(profileId)
  }

  makeRoomFor(owner: string): boolean {
    return this.o.room.forCaller(owner)
  }

  makeRoomInPool(): void {
    this.o.room.forRoom()
  }

  /** Run one task end to end. Never throws: every path ends the task in a definite state. */
  async run(task: TaskRecord, signal: AbortSignal): Promise<void> {
    const { containers, states, workspaces } = this.o
    const { runtime, command } = requireEngine(this.o.engine)
    const owner = task.owner_id
    // A release of the workspace's container under way saves its conversation first.
    await containers.settled(task.workspace_id)
    let ws = await workspaces.records.get(owner, task.workspace_id)
    let keepWarm = task.mode === 'session'
    let end: TaskEnd
    let result: ResultEvent | null = null
    // The task ends on the runner's result line; the runner's exit is awaited before the
    // container is released, and the workspace stays busy until then.
    let exited: Promise<unknown> = Promise.resolve()
    // Permission requests not yet closed by the runner's decision event.
    const open = new Set<string>()
    // Why the container claim waits is written on the task (once per reason), before any later write.
    let marked: Promise<void> = Promise.resolve()
    const limit = new RunTimeLimit(task.max_duration_s)
    const spans = new RunTrace(task, this.o.instanceId)
    let profile: ProfileRecord | null = null
    // The warm agent refill this run's claim asked for: started at the first token, or at the end.
    let refill: (() => void) | undefined
    // The agent the runner runs in, and whether it lives on for the session's next task.
    let agent: { agent: AgentProcess | null; stay: boolean } = { agent: null, stay: false }
    let staying = () => false
    try {
      profile = await this.o.profiles.records.find(owner, task.profile_id)
      if (!profile)
        throw new ApiError('INTERNAL_ERROR', `Profile ${task.profile_id} was deleted before the task started`)
      const queued = task
      const onWait: RunPlan['onWait'] = (waiting) => {
        if (signal.aborted || queued.waiting?.reason === waiting.reason) return
        queued.waiting = waiting
        marked = marked.then(() => states.markWaiting(queued, waiting)).catch(() => {})
      }
      const plan: RunPlan = { task, workspace: ws, profile, onWait }
      const leased = await spans.claim(() => containers.lease(plan, signal))
      refill = leased.refill
      await marked
      task = await states.move(task, 'starting', { trace: spans.traceparent, waiting: null })
      const { volume, sdk_session_id } = leased.workspace
      ws = await workspaces.setStatus(owner, ws.id, 'running', {
        volume,
        sdk_session_id,
        container_id: leased.lease.container.id,
        instance_id: this.o.instanceId ?? null,
      })
      const resolved = leased.input ?? (await materialize(this.o.catalog, task, profile, ws))
      agent = await this.agentFor(task, leased, resolved)
      const input = spans.runnerInput(resolved, !agent.agent, agent.agent?.ready)
      signal.throwIfAborted()
      const runSignal = AbortSignal.any([signal, limit.forced.signal])
      const observe = this.firstLines(task)
      const session = runnerEvents(
        { runtime, command, logger: this.o.logger },
        { engineId: leased.lease.container.engine_id, taskId: task.id, input, signal: runSignal, ...agent },
      )
      staying = () => session.staying
      // Controls sent once the task shows `running` wait in the session until the runner starts.
      const detach = this.o.controls.attach(task.id, (control) => session.send(control))
      try {
        task = await states.move(task, 'running', { started_at: isoNow(this.o.clock), metered_by: meteredBy(input) })
        limit.start((control) => session.send(control))
        const timeoutS = input.approval_timeout_s ?? DEFAULT_APPROVAL_TIMEOUT_S
        for await (const event of session) {
          // Fenced: nothing more is recorded for the task (its takeover owns it now).
          if (signal.reason instanceof TaskFenced) throw signal.reason
          observe(event)
          if (event.type === 'token') refill?.()
          if (event.type === 'background_task') containers.living.note(ws.id, event)
          spans.event(event)
          // A request is stored before anyone sees it, so a decision never meets a 404.
          if (event.type === 'permission_request' && !(await this.o.approvals.open(task, event, timeoutS)))
            this.o.logger.warn('runner asked with a request id that is not an approval id', { task: task.id })
          await this.o.events.record(task, [event])
          task = await this.counted(task, event, open)
          if (event.type === 'result') result = event
        }
      } finally {
        detach()
        limit.stop()
        // A run that ended before it read the runner's events (its `running` write failed) stops the runner.
        session.close()
      }
      exited = session.exited
      end = endOf(result!)
      if (end.error?.code === 'CONTAINER_FAILED' || end.error?.code === 'DISK_LIMIT_EXCEEDED') keepWarm = false
      if (limit.fired) end = limit.end(end)
    } catch (err) {
      if (signal.reason instanceof TaskFenced) return this.fenced(task, ws)
      if (limit.fired && !signal.aborted) {
        end = limit.end(null)
        keepWarm = false
      } else if (signal.aborted) {
        end = signal.reason instanceof TaskInterrupted ? INTERRUPTED_END : { status: 'cancelled' }
      } else {
        const error = errorOf(err)
        if (error.code === 'INTERNAL_ERROR' && !isApiError(err))
          this.o.logger.error('task failed', { task: task.id, error: String(err) })
        end = { status: 'failed', error }
        // A container that failed is not trusted with the next prompt.
        keepWarm = false
      }
    }
    refill?.()
    // The conversation the result names is stored with the workspace's next write: now
    // when it stays warm, with its `idle` status when it is released.
    const sdkSessionId = result?.session_id && result.session_id !== ws.sdk_session_id ? result.session_id : undefined
    // Before anyone sees the task end, and while its workspace stays busy: never fails the task.
    await this.o.checkpoints?.keep(task, ws, sdkSessionId ?? ws.sdk_session_id)
    // By the time anyone sees the task end, its workspace has stopped counting as running;
    // the container is removed right after.
    let lease: Lease | undefined
    const keep = keepWarm && containers.has(ws.id) && !this.o.scheduler.closed
    // The session's agent lives on with its container (else it ends before its files and conversation are kept).
    if (agent.agent && staying()) {
      if (keep) containers.living.keep(owner, ws.id, agent.agent)
      else await agent.agent.end()
    }
    if (keep && sdkSessionId) ws = await workspaces.patch(owner, ws.id, { sdk_session_id: sdkSessionId })
    if (!keep) lease = await containers.detach(owner, ws.id, { fromRun: true, workspace: ws, sdkSessionId })
    if (open.size > 0)
      await this.o.approvals
        .cancelPending(task)
        .catch((err) => this.o.logger.warn('could not cancel pending approvals', { task: task.id, error: String(err) }))
    // A task that never started used nothing.
    if (this.o.usage && task.started_at)
      end = await settleUsage(this.o.usage, task, end, {
        profile,
        endedAt: this.o.clock.now(),
        runner: result,
      }).catch((err: unknown) => {
        this.o.logger.warn('could not record task usage', { task: task.id, error: String(err) })
        return end
      })
    await marked
    await states.finish(task, end)
    spans.end(end)
    await exited.catch(() => {})
    // Only now is the workspace free for its idle clock (the runner has exited).
    if (keep) containers.keepWarm(owner, ws.id, ws.session_id)
    await lease?.release()
  }

  /**
   * The agent a task runs on. A session task (where its agent can live: see `canLive`) runs
   * on the session's living agent while that still fits it (same settings; otherwise it is
   * ended and the conversation resumed in a new one), or on an agent started for it, and it
   * stays; a batch task on the warm agent its claim took, if any.
   */
  private async agentFor(
    task: TaskRecord,
    leased: Claimed,
    input: RunnerInput,
  ): Promise<{ agent: AgentProcess | null; stay: boolean }> {
    const owner = task.owner_id
    const stay = task.mode === 'session' && canLive(input) && !this.o.scheduler.closed
    let agent = leased.agent
    if (agent && leased.living && (!stay || agent.key !== livingKey(owner, input))) {
      await agent.end()
      agent = null
    }
    if (!agent && stay)
      agent = await this.o.containers.living.start(
        leased.lease,
        owner,
        task.workspace_id,
        input,
        livingKey(owner, input),
      )
    return { agent, stay }
  }

  /** Observes the runner's first line (how long it took to start) and the model's first token (since the submit). */
  private firstLines(task: TaskRecord): (event: RunnerEvent) => void {
    const metrics = this.o.metrics ?? noopMetrics
    const started = performance.now()
    let lines = 0
    let tokens = 0
    return (event) => {
      if (lines++ === 0) metrics.runnerStarted(secondsFrom(started))
      if (event.type === 'token' && tokens++ === 0)
        metrics.firstToken({ mode: task.mode, seconds: secondsSince(task.created_at, this.o.clock.now()) })
    }
  }

  /**
   * A run stopped because this instance lost its lease: its container goes (a local
   * resource), and the task's end, approvals and notifications are left to the takeover.
   */
  private async fenced(task: TaskRecord, ws: WorkspaceRecord): Promise<void> {
    this.o.logger.warn('task run stopped: this instance lost its coordination lease', { task: task.id })
    try {
      const lease = await this.o.containers.detach(task.owner_id, ws.id, { fromRun: true, workspace: ws })
      await lease?.release()
    } catch (err) {
      this.o.logger.warn('could not release a fenced task’s container', { task: task.id, error: String(err) })
    }
  }

  /** The task with its count of open permission requests after `event` (written when it changed). */
  private async counted(task: TaskRecord, event: RunnerEvent, open: Set<string>): Promise<TaskRecord> {
    if (event.type === 'permission_request') open.add(event.request_id)
    else if (event.type === 'permission_decision') {
      await this.o.approvals.closed(task.owner_id, event)
      if (!open.delete(event.request_id)) return task
    } else return task
    return this.o.states.update(task, { pending_approvals: open.size })
  }
}
