/** One task run end to end: its container leased, statuses, the runner's result, the container kept warm or released. */
import { ApiError, isApiError } from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import type { Logger } from '../ports/logger.js'
import type { ProfilesService } from '../resources/profiles.js'
import type { Lease } from '../runtime/index.js'
import type { WorkspaceRecord, WorkspacesService } from '../workspaces/workspaces.js'
import { requireEngine, type TaskEngine } from './engine.js'
import type { TaskLifecycle } from './lifecycle.js'
import { materialize, type MaterializeDeps } from './materialize.js'
import { endOf, errorOf, type TaskEnd, type TaskRecord } from './record.js'
import { runRunner } from './runner-session.js'
import type { SessionContainers } from './session-containers.js'
import type { TaskEvents } from './task-events.js'
import type { Workload } from './workload.js'

export interface TaskRunsOptions {
  /** This instance (recorded on the workspace whose container it holds). */
  instanceId?: string
  engine: TaskEngine | undefined
  clock: Clock
  logger: Logger
  profiles: ProfilesService
  workspaces: WorkspacesService
  catalog: MaterializeDeps
  containers: SessionContainers
  lifecycle: TaskLifecycle
  events: TaskEvents
  work: Workload
}

/**
 * Runs a task: leases its workspace's container, marks it `starting` then `running`,
 * resolves the runner's input, runs the runner and ends the task with its result, a limit
 * error, CONTAINER_FAILED, or `cancelled` when its signal aborts. A session keeps its
 * container warm for the follow-up; a batch task's, or one that failed, is released.
 *
 * @example
 * ```ts
 * const runs = new TaskRuns({ engine, clock, logger, profiles, workspaces, catalog, containers, lifecycle, events, work })
 * await runs.run(task, abort.signal) // never throws
 * ```
 */
export class TaskRuns {
  constructor(private readonly o: TaskRunsOptions) {}

  /** Run one task end to end. Never throws: every path ends the task in a definite state. */
  async run(task: TaskRecord, signal: AbortSignal): Promise<void> {
    const { containers, lifecycle, workspaces } = this.o
    const { runtime, command } = requireEngine(this.o.engine)
    const owner = task.owner_id
    let ws: WorkspaceRecord = await workspaces.records.get(owner, task.workspace_id)
    let keepWarm = task.mode === 'session'
    let end: TaskEnd
    // Workspace fields learnt but not yet stored: they go with its next write.
    let changes: Partial<WorkspaceRecord> = {}
    // The task ends on the runner's result line; the runner's exit is awaited before the
    // container is released, and the workspace stays busy until then.
    let exited: Promise<unknown> = Promise.resolve()
    try {
      const profile = await this.o.profiles.records.find(owner, task.profile_id)
      if (!profile) throw new ApiError('INTERNAL_ERROR', `Profile ${task.profile_id} was deleted before the task started`)
      const leased = await containers.lease(task, profile, ws, signal)
      ws = leased.ws
      changes = leased.changes
      task = await lifecycle.setStatus(task, 'starting')
      ws = await workspaces.setStatus(owner, ws.id, 'running', { ...changes, container_id: leased.lease.container.id, instance_id: this.o.instanceId ?? null })
      changes = {}
      const input = leased.early ?? (await materialize(this.o.catalog, task, profile, ws))
      signal.throwIfAborted()
      task = await lifecycle.setStatus(task, 'running', { started_at: isoNow(this.o.clock) })
      const running = task
      const { result, exited: runnerExited } = await runRunner(
        { runtime, command, logger: this.o.logger },
        { engineId: leased.lease.container.engine_id, taskId: task.id, input, signal, agent: leased.agent, record: (events) => this.o.events.record(running, events) },
      )
      exited = runnerExited
      // Stored with the workspace's next write: its release, or now when it stays warm.
      if (result.session_id && result.session_id !== ws.sdk_session_id) changes = { sdk_session_id: result.session_id }
      end = endOf(result)
      if (end.error?.code === 'CONTAINER_FAILED') keepWarm = false
    } catch (err) {
      if (signal.aborted) {
        end = { status: 'cancelled' }
      } else {
        const error = errorOf(err)
        if (error.code === 'INTERNAL_ERROR' && !isApiError(err)) this.o.logger.error('task failed', { task: task.id, error: String(err) })
        end = { status: 'failed', error }
        // A container that failed is not trusted with the next prompt.
        keepWarm = false
      }
    }
    // By the time anyone sees the task end, its workspace has stopped counting as running;
    // the container is removed right after.
    let lease: Lease | undefined
    const keep = keepWarm && containers.has(ws.id) && !this.o.work.closed
    if (keep && Object.keys(changes).length) ws = await workspaces.patch(owner, ws.id, changes)
    if (!keep) lease = await containers.detach(owner, ws.id, { fromRun: true, changes })
    await lifecycle.finish(task, end)
    await exited.catch(() => {})
    // Only now is the workspace free for its idle clock (the runner has exited).
    if (keep) containers.keepWarm(owner, ws.id, ws.session_id)
    await lease?.release()
  }
}
