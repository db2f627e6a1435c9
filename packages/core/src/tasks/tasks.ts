import * as v from 'valibot'
import { ApiError, isApiError, validationError } from '../errors.js'
import { newId } from '../ids.js'
import { term } from '../records/indexes.js'
import type { ConcurrencySlots } from '../limits/concurrency.js'
import { isoNow, type Clock } from '../ports/clock.js'
import { collectExec, type ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import type { Caller } from '../caller.js'
import { RunnerEvent, type RunnerInput } from './runner-protocol.js'
import { TaskError, type SubmitTask, type Task, type TaskResult, type TaskStatus, type TranscriptEvent } from '../schemas/task.js'
import { OwnedCollection, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import type { EventBus } from './event-bus.js'
import type { EventLog } from '../workspaces/event-log.js'
import { eventsFile, materialize, WORKSPACE_DIR, type MaterializeDeps } from './materialize.js'
import type { ContainerPool, Lease, PooledContainer } from '../runtime/index.js'
import type { ProfilesService, ProfileRecord } from '../resources/profiles.js'
import type { EnvironmentsService } from '../resources/environments.js'
import type { WorkspaceRecord, WorkspacesService } from '../workspaces/workspaces.js'
import { nextQueued } from './task-queue.js'
import type { WorkspaceSnapshots } from '../workspaces/workspace-snapshots.js'
import { secretForms } from './secret-forms.js'
import { createWorkspaceVolume, recoverVolumes, workspaceVolumeName } from '../runtime/volumes.js'
import { warmKey, type WarmAgent, type WarmAgents } from './warm-agents.js'

/** A stored task. */
export interface TaskRecord extends OwnedRecord {
  mode: 'batch' | 'session'
  profile_id: string
  prompt: string
  priority: 'low' | 'normal' | 'high'
  workspace_id: string
  /** The workspace's session id (reported for session mode only). */
  session_id: string
  allowed_tools: string[] | null
  max_turns: number | null
  max_budget_usd: number | null
  status: TaskStatus
  started_at: string | null
  finished_at: string | null
  result: TaskResult | null
  error: TaskError | null
  /** Queued without a concurrency slot: waits in the queue until its profile has one free (playbook runs). */
  slot_pending?: boolean
  /** The task's events in its workspace's log: how many, and the first one's `seq` (kept when it ends). */
  event_count?: number
  first_seq?: number
}

/** Where task containers come from and how the runner is started in them. */
export interface TaskEngine {
  runtime: ContainerRuntime
  pool: ContainerPool
  /** The command that starts the runner inside a container, e.g. `['berth-runner']`. */
  command: string[]
  /** Agents started ahead of tasks (see {@link WarmAgents}); without it every task starts its runner cold. */
  warmAgents?: WarmAgents
}

export interface TasksOptions {
  store: Store
  clock: Clock
  logger: Logger
  eventLog: EventLog
  bus: EventBus
  slots: ConcurrencySlots
  profiles: ProfilesService
  environments: EnvironmentsService
  workspaces: WorkspacesService
  catalog: MaterializeDeps
  engine?: TaskEngine | undefined
  /** A session's container is released after this long without a prompt (default 15 min). */
  sessionIdleMs?: number
  /** After a restart, how long to wait for a runner still at work to write its result (default 30 s). */
  recoveryGraceMs?: number
  /** Keeps the files of a workspace without a volume when its container is released. */
  snapshots?: WorkspaceSnapshots | undefined
}

type ResultEvent = Extract<RunnerEvent, { type: 'result' }>

const ACTIVE: TaskStatus[] = ['queued', 'starting', 'running']

/** How long a runner may take to exit after writing its result before it is killed. */
const RUNNER_EXIT_GRACE_MS = 10_000

/** The agent SDK's conversation state inside a workspace (the runner's config dir). */
const CONVERSATION_DIR = `${WORKSPACE_DIR}/.berth`
/** Conversation archives above this size are not kept (the follow-up starts afresh). */
const MAX_CONVERSATION_BYTES = 20 * 1024 * 1024

/** Runner outcomes that fail a task, and the error code each becomes. */
const OUTCOME_ERROR: Record<Exclude<ResultEvent['outcome'], 'success'>, TaskError['code']> = {
  error_max_turns: 'TURN_LIMIT_EXCEEDED',
  error_max_budget_usd: 'BUDGET_EXCEEDED',
  model_error: 'MODEL_ERROR',
  error_during_execution: 'CONTAINER_FAILED',
}

interface DetachOptions {
  /** Save the conversation first (no volume keeps it). */
  keepConversation?: boolean
  /** Called by the run that used the workspace, at its end. */
  fromRun?: boolean
}

/** A session's claimed container and its idle timer. */
interface Warm {
  lease: Lease
  timer: ReturnType<typeof setTimeout> | null
  /** The workspace's profile (whose concurrency slot it holds). */
  profile_id?: string | null
}

/**
 * Tasks: submission (validation, per-profile concurrency), a persistent queue, execution
 * in pooled containers through the runner, results and limit errors, cancel, and recovery
 * after a restart.
 *
 * Batch tasks get a fresh workspace and container, reaped when they end. Session tasks
 * keep their container warm; a follow-up with the `session_id` runs in it and resumes the
 * conversation, queued behind a prompt still running in the same session. After
 * `sessionIdleMs` the container is released (the workspace goes `idle`); a later follow-up
 * claims a new one, with the workspace's volume when the profile has persistent sessions.
 *
 * @example
 * ```ts
 * const { task_id } = await tasks.submit(caller, { mode: 'batch', profile_id, prompt: 'Summarise README.md' })
 * const task = await tasks.get(caller.id, task_id) // poll until completed | failed | cancelled
 * ```
 */
export class TasksService {
  readonly records: OwnedCollection<TaskRecord>
  private readonly queue: TaskRecord[] = []
  private readonly running = new Map<string, { abort: AbortController; done: Promise<void> }>()
  /** Workspaces with a task under way → their owner. */
  private readonly busy = new Map<string, string>()
  private readonly warm = new Map<string, Warm>()
  /** Workspaces whose container is being released (conversation saved, then reaped). */
  private readonly releasing = new Map<string, Promise<unknown>>()
  /** Profiles whose idle session is being released for a task waiting for its slot. */
  private readonly evicting = new Set<string>()
  /** Events recorded per task under way: how many, and the first `seq`. */
  private readonly eventCounts = new Map<string, { count: number; first: number }>()
  private closed = false

  constructor(private readonly o: TasksOptions) {
    this.records = new OwnedCollection<TaskRecord>(o.store, 'tasks', 'task')
  }

  /** The store tasks live in (for records that belong with them, e.g. WebSocket request ids). */
  get recordsStore(): Store {
    return this.o.store
  }

  view(r: TaskRecord): Task {
    return {
      task_id: r.id,
      status: r.status,
      mode: r.mode,
      profile_id: r.profile_id,
      priority: r.priority,
      prompt: r.prompt,
      session_id: r.mode === 'session' ? r.session_id : null,
      workspace_id: r.workspace_id,
      created_at: r.created_at,
      started_at: r.started_at,
      finished_at: r.finished_at,
      result: r.result,
      error: r.error,
    }
  }

  private engine(): TaskEngine {
    if (!this.o.engine) throw new ApiError('CONTAINER_FAILED', 'This server has no container runtime configured, so it cannot run tasks')
    return this.o.engine
  }

  /**
   * Validate, take a concurrency slot when a workspace would start, persist, queue.
   * `opts.workspace` names the new workspace's session id and name (playbook runs start
   * `pb-…` sessions); it needs a `session` task without `session_id`.
   */
  async submit(
    caller: Caller,
    input: SubmitTask,
    opts: { workspace?: { session_id: string; name: string }; queueWhenFull?: boolean } = {},
  ): Promise<{ task_id: string; status: TaskStatus; created_at: string; session_id: string | null; workspace_id: string }> {
    const owner = caller.id
    this.engine()
    const profile = await this.o.profiles.records.find(owner, input.profile_id)
    if (!profile) throw validationError([{ location: 'body', path: 'profile_id', message: `profile ${input.profile_id} does not exist` }])
    await this.o.environments.assertRunnable(owner, profile.environment_id)
    let ws: WorkspaceRecord | null = null
    if (input.session_id) {
      ws = await this.o.workspaces.bySession(owner, input.session_id)
      if (!ws) throw validationError([{ location: 'body', path: 'session_id', message: `session ${input.session_id} does not exist` }])
      if (ws.profile_id !== profile.id) {
        throw validationError([{ location: 'body', path: 'profile_id', message: `session ${input.session_id} belongs to profile ${ws.profile_id}` }])
      }
    }
    const wsId = ws?.id ?? newId('workspace')
    // A workspace that holds no slot (new, or idle) would start one more: count it now,
    // synchronously, so parallel submissions are admitted exactly up to the limit.
    const held = this.o.slots.has(profile.id, wsId)
    let slotPending = false
    try {
      this.o.slots.acquire(profile.id, wsId)
    } catch (err) {
      // Playbook and webhook runs wait for a slot in the queue instead of failing.
      if (!opts.queueWhenFull || !isApiError(err) || err.code !== 'CONCURRENCY_LIMIT') throw err
      slotPending = true
    }
    try {
      ws ??= await this.o.workspaces.create(owner, { id: wsId, profile_id: profile.id, persistent: profile.persistent_sessions, ...opts.workspace })
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
        status: 'queued',
        started_at: null,
        finished_at: null,
        result: null,
        error: null,
        ...(slotPending && { slot_pending: true }),
        created_at: now,
        updated_at: now,
      }
      await this.records.put(record)
      await this.o.store.set(`active-tasks:${record.id}`, { owner })
      this.queue.push(record)
      this.o.bus.publish({ type: 'task.status', task_id: record.id, status: 'queued', task: this.view(record), owner_id: owner })
      queueMicrotask(() => this.pump())
      return {
        task_id: record.id,
        status: record.status,
        created_at: record.created_at,
        session_id: record.mode === 'session' ? record.session_id : null,
        workspace_id: record.workspace_id,
      }
    } catch (err) {
      if (!held && !slotPending) this.o.slots.release(profile.id, wsId)
      throw err
    }
  }

  async get(owner: string, id: string): Promise<Task> {
    return this.view(await this.records.get(owner, id))
  }

  async list(owner: string, page: Page, filter: { status?: TaskStatus | undefined; mode?: 'batch' | 'session' | undefined }): Promise<Paged<Task>> {
    const { items, total } = await this.records.list(owner, page, term({ status: filter.status, mode: filter.mode }))
    return { items: items.map((t) => this.view(t)), total }
  }

  /**
   * A page of a task's own events from its workspace's log (`seq` is the workspace's) and
   * how many it has: counted as they are recorded, so the total never reads the log.
   */
  async events(owner: string, id: string, after: number, limit: number): Promise<{ events: TranscriptEvent[]; total: number }> {
    const t = await this.records.get(owner, id)
    const live = this.eventCounts.get(id)
    const first = live?.first ?? t.first_seq
    // The task's events start at `first`: the workspace's earlier tasks are not scanned.
    const from = first !== undefined ? Math.max(after, first - 1) : after
    const events = await this.o.eventLog.read(owner, t.workspace_id, { after: from, limit, taskId: id })
    let total = live?.count ?? t.event_count
    if (total === undefined) {
      // Tasks recorded before counts were kept, or that never ran.
      total = ACTIVE.includes(t.status) ? 0 : (await this.o.eventLog.read(owner, t.workspace_id, { after: 0, limit: Number.MAX_SAFE_INTEGER, taskId: id })).length
    }
    return { events, total }
  }

  /** Cancel a queued or running task; a task already done is returned unchanged. */
  async cancel(owner: string, id: string): Promise<Task> {
    const t = await this.records.get(owner, id)
    if (!ACTIVE.includes(t.status)) return this.view(t)
    const queued = this.queue.findIndex((q) => q.id === id)
    if (queued >= 0) {
      this.queue.splice(queued, 1)
      const done = await this.finish(t, { status: 'cancelled' })
      await this.releaseIfUnused(t)
      return this.view(done)
    }
    const run = this.running.get(id)
    if (run) {
      run.abort.abort(new ApiError('VALIDATION_FAILED', 'cancelled'))
      await run.done
    }
    return this.view(await this.records.get(owner, id))
  }

  /** Start serving: recover what a previous run left, then run the queue. */
  async start(): Promise<void> {
    await this.recover()
    this.pump()
  }

  /**
   * Whether the pool should keep an in-use container it finds at start: yes when its
   * workspace still has work (a task that was running, or a warm session).
   */
  async accountFor(c: PooledContainer): Promise<boolean> {
    if (!c.owner_id || !c.workspace_id) return false
    const ws = await this.o.workspaces.records.find(c.owner_id, c.workspace_id)
    return ws !== null && ws.status === 'running'
  }

  /** The next task to start: its workspace free and, for a task waiting for a slot, a slot free. */
  private nextIndex(): number {
    const index = nextQueued(this.queue, this.busy.values(), (t) => !this.busy.has(t.workspace_id) && (!t.slot_pending || this.slotFree(t)))
    if (index < 0) this.makeRoom()
    return index
  }

  private slotFree(t: TaskRecord): boolean {
    return this.o.slots.has(t.profile_id, t.workspace_id) || this.o.slots.running(t.profile_id) < this.o.slots.limit
  }

  /**
   * Tasks waiting for a slot that a warm but idle session holds: release that session now
   * (its conversation kept) rather than let the run wait out the idle timer.
   */
  private makeRoom(): void {
    for (const t of this.queue) {
      if (!t.slot_pending || this.slotFree(t) || this.evicting.has(t.profile_id)) continue
      for (const [wsId, w] of this.warm) {
        if (w.profile_id !== t.profile_id || !w.timer || this.busy.has(wsId) || this.queue.some((q) => q.workspace_id === wsId)) continue
        clearTimeout(w.timer)
        w.timer = null
        const owner = w.lease.container.owner_id ?? t.owner_id
        this.evicting.add(t.profile_id)
        void this.detachWorkspace(owner, wsId, { keepConversation: true })
          .then((lease) => lease?.release())
          .catch((err) => this.o.logger.warn('could not release a session', { workspace: wsId, error: String(err) }))
          .finally(() => this.evicting.delete(t.profile_id))
        return
      }
    }
  }

  /** Start every queued task whose workspace is free; the pool orders the waits for containers. */
  private pump(): void {
    if (this.closed) return
    for (let i = this.nextIndex(); i >= 0; i = this.nextIndex()) {
      const [task] = this.queue.splice(i, 1)
      if (task!.slot_pending) {
        this.o.slots.acquire(task!.profile_id, task!.workspace_id)
        delete task!.slot_pending
      }
      this.busy.set(task!.workspace_id, task!.owner_id)
      const abort = new AbortController()
      const done = this.run(task!, abort.signal)
        .catch((err) => this.o.logger.error('task run failed unexpectedly', { task: task!.id, error: String(err) }))
        .finally(() => {
          this.running.delete(task!.id)
          this.busy.delete(task!.workspace_id)
          this.pump()
        })
      this.running.set(task!.id, { abort, done })
    }
  }

  private async setStatus(t: TaskRecord, status: TaskStatus, extra: Partial<TaskRecord> = {}): Promise<TaskRecord> {
    const current = (await this.records.find(t.owner_id, t.id)) ?? t
    const next = { ...current, ...extra, status, updated_at: isoNow(this.o.clock) }
    await this.records.put(next)
    this.o.bus.publish({ type: 'task.status', task_id: t.id, status, task: this.view(next), owner_id: t.owner_id })
    return next
  }

  private async finish(
    t: TaskRecord,
    end: { status: 'completed' | 'failed' | 'cancelled'; result?: TaskResult | null; error?: TaskError | null },
  ): Promise<TaskRecord> {
    // Events first: a task stored as ended is never recovered again, so a crash between its
    // end and a later flush would lose the events its subscribers already saw.
    await this.o.eventLog.flush(t.owner_id, t.workspace_id)
    const counted = this.eventCounts.get(t.id)
    const done = await this.setStatus(t, end.status, {
      finished_at: isoNow(this.o.clock),
      result: end.result ?? null,
      error: end.error ?? null,
      event_count: counted?.count ?? t.event_count ?? 0,
      ...(counted && { first_seq: counted.first }),
    })
    this.eventCounts.delete(t.id)
    await this.o.store.remove(`active-tasks:${t.id}`)
    return done
  }

  /** Run one task end to end. Never throws: every path ends the task in a definite state. */
  private async run(task: TaskRecord, signal: AbortSignal): Promise<void> {
    const { runtime, pool, command } = this.engine()
    const owner = task.owner_id
    let ws = await this.o.workspaces.records.get(owner, task.workspace_id)
    let keepWarm = task.mode === 'session'
    let end: { status: 'completed' | 'failed' | 'cancelled'; result?: TaskResult; error?: TaskError }
    // The task ends on the runner's result line; the runner's exit is awaited before the
    // container is released, and the workspace stays busy until then.
    let exited: Promise<unknown> = Promise.resolve()
    try {
      const profile = await this.o.profiles.records.find(owner, task.profile_id)
      if (!profile) throw new ApiError('INTERNAL_ERROR', `Profile ${task.profile_id} was deleted before the task started`)
      // A release under way finishes first (its conversation saved), then this starts afresh.
      const releasing = this.releasing.get(ws.id)
      if (releasing) {
        await releasing
        ws = await this.o.workspaces.records.get(owner, task.workspace_id)
      }
      let warm = this.warm.get(ws.id)
      if (warm?.timer) clearTimeout(warm.timer)
      // A new container with nothing to restore may get an agent that is already up. Warm
      // agents live in the default environment's containers: only its tasks may take one.
      const env = warm ? null : await this.o.environments.resolve(owner, profile.environment_id, await this.endpointHosts(profile))
      let early: RunnerInput | null = null
      let agent: WarmAgent | null = null
      const agents = this.o.engine?.warmAgents
      if (env && Object.keys(env.spec).length === 0 && agents && !ws.persistent && !ws.sdk_session_id) {
        early = await materialize(this.o.catalog, task, profile, ws).catch(() => null)
        if (early) agent = agents.take(warmKey(owner, early))
      }
      if (agent) {
        await pool.assign(agent.lease.container.id, ws.id)
        warm = { lease: agent.lease, timer: null, profile_id: profile.id }
        this.warm.set(ws.id, warm)
      } else if (!warm) {
        // Parked agents give their containers back when a cold task needs the room.
        if (agents) {
          const st = pool.stats()
          if (st.idle === 0 && st.in_use >= st.max) await agents.evictOne()
        }
        const volume = ws.persistent ? (ws.volume ?? workspaceVolumeName(ws.id)) : null
        if (volume) await createWorkspaceVolume(runtime, volume, { pool: pool.name, owner_id: owner, workspace_id: ws.id })
        const mounts = volume ? [{ type: 'volume' as const, source: volume, target: WORKSPACE_DIR }] : []
        // Without a spec the claim takes a warm container (the default environment's); any
        // other environment, or a volume, gets a container made for the claim.
        const spec = { ...env!.spec, ...(mounts.length && { mounts }) }
        const lease = await pool.claim({
          owner_id: owner,
          workspace_id: ws.id,
          purpose: task.mode,
          priority: task.priority,
          signal,
          ...(Object.keys(spec).length && { spec }),
        })
        warm = { lease, timer: null, profile_id: profile.id }
        this.warm.set(ws.id, warm)
        if (volume && !ws.volume) ws = await this.o.workspaces.patch(owner, ws.id, { volume })
        if (!volume && ws.sdk_session_id && !(await this.restoreConversation(runtime, lease, ws))) {
          // Nothing kept to resume from: the follow-up starts a new conversation.
          ws = await this.o.workspaces.patch(owner, ws.id, { sdk_session_id: null })
        }
      }
      // One more like this one for the next task (after this one's claim, so it takes no container this one needed).
      if (early) agents?.prepare(owner, early)
      task = await this.setStatus(task, 'starting')
      ws = await this.o.workspaces.setStatus(owner, ws.id, 'running', { container_id: warm.lease.container.id })
      const input = early ?? (await materialize(this.o.catalog, task, profile, ws))
      signal.throwIfAborted()
      task = await this.setStatus(task, 'running', { started_at: isoNow(this.o.clock) })
      const { result, exited: runnerExited } = await this.exec(runtime, command, warm.lease, task, input, signal, agent)
      exited = runnerExited
      if (result.session_id) ws = await this.o.workspaces.patch(owner, ws.id, { sdk_session_id: result.session_id })
      end = endOf(result)
      if (end.error?.code === 'CONTAINER_FAILED') keepWarm = false
    } catch (err) {
      if (signal.aborted) {
        end = { status: 'cancelled' }
      } else {
        const code = isApiError(err) && TASK_ERROR_CODES.includes(err.code) ? (err.code as TaskError['code']) : 'INTERNAL_ERROR'
        if (code === 'INTERNAL_ERROR' && !isApiError(err)) this.o.logger.error('task failed', { task: task.id, error: String(err) })
        end = { status: 'failed', error: { code, error: isApiError(err) ? err.message : 'Internal error while running the task' } }
        // A container that failed is not trusted with the next prompt.
        keepWarm = false
      }
    }
    // By the time anyone sees the task end, its workspace has stopped counting as running;
    // the container is removed right after.
    let lease: Lease | undefined
    const keep = keepWarm && this.warm.has(ws.id) && !this.closed
    if (!keep) lease = await this.detachWorkspace(owner, ws.id, { fromRun: true })
    await this.finish(task, end)
    await exited.catch(() => {})
    // Only now is the workspace free for its idle clock (the runner has exited).
    if (keep) this.scheduleIdle(owner, ws.id, ws.session_id)
    await lease?.release()
  }

  /** Hosts the agent must reach under an allowlist: the model endpoint and remote MCP servers. */
  private async endpointHosts(profile: ProfileRecord): Promise<string[]> {
    const owner = profile.owner_id
    const hosts = new Set<string>()
    const credential = await this.o.catalog.apiKeys.resolve(owner, profile.api_key_id).catch(() => null)
    if (credential && credential.provider !== 'stub') hosts.add(new URL(credential.base_url ?? 'https://api.anthropic.com').hostname)
    const servers = [...Object.values(profile.mcp_servers), ...(await this.o.catalog.tools.forProfile(owner, profile.id)).map((t) => t.server)]
    for (const server of servers) if (server.type !== 'stdio') hosts.add(new URL(server.url).hostname)
    return [...hosts].map((h) => h.replace(/^\[(.*)\]$/, '$1'))
  }

  /** Exec the runner and turn its lines into stored events; the result event, or CONTAINER_FAILED. */
  private async exec(
    runtime: ContainerRuntime,
    command: string[],
    lease: Lease,
    task: TaskRecord,
    input: RunnerInput,
    signal: AbortSignal,
    agent: WarmAgent | null = null,
  ): Promise<{ result: ResultEvent; exited: Promise<unknown> }> {
    let result: ResultEvent | null = null
    let sawResult!: () => void
    const resultSeen = new Promise<null>((r) => (sawResult = () => r(null)))
    let pending = ''
    let stderr = ''
    let chain = Promise.resolve()
    const decoder = new TextDecoder()
    const onLine = (line: string) => {
      if (!line.trim()) return
      let parsed: unknown
      try {
        parsed = JSON.parse(line)
      } catch {
        this.o.logger.warn('runner wrote a line that is not JSON', { task: task.id })
        return
      }
      const event = v.safeParse(RunnerEvent, parsed)
      if (!event.success) {
        this.o.logger.warn('runner wrote an unknown event', { task: task.id })
        return
      }
      if (event.output.type === 'result') {
        result = event.output
        sawResult()
      }
      chain = chain.then(() => this.record(task, [event.output]))
    }
    const out = {
      onStdout: (chunk: Uint8Array) => {
        pending += decoder.decode(chunk, { stream: true })
        let nl: number
        while ((nl = pending.indexOf('\n')) >= 0) {
          onLine(pending.slice(0, nl))
          pending = pending.slice(nl + 1)
        }
      },
      onStderr: (chunk: Uint8Array) => {
        stderr = (stderr + Buffer.from(chunk).toString('utf8')).slice(-4000)
      },
    }
    const proc = agent
      ? agent.handOff({ id: task.id, prompt: input.prompt, events_file: input.events_file }, out, signal)
      : await runtime.exec(lease.container.engine_id, { cmd: command, cwd: WORKSPACE_DIR, stdin: `${JSON.stringify(input)}\n`, signal, ...out })
    const ended = await Promise.race([proc.exit, resultSeen])
    if (ended === null) {
      await chain
      signal.throwIfAborted()
      // A runner that hangs after its result is killed rather than holding the workspace.
      const exited = new Promise<void>((resolve) => {
        const timer = setTimeout(() => void proc.kill().catch(() => {}), RUNNER_EXIT_GRACE_MS)
        timer.unref?.()
        proc.exit.then(
          () => resolve(),
          () => resolve(),
        ).finally(() => clearTimeout(timer))
      })
      return { result: result!, exited }
    }
    const exit = ended
    onLine(pending)
    await chain
    signal.throwIfAborted()
    if (!result) {
      throw new ApiError('CONTAINER_FAILED', `The agent runner ended without a result (exit code ${exit.exitCode ?? 'unknown'})`, {
        exit_code: exit.exitCode,
        stderr_tail: redactAll(stderr.slice(-1000), input.redact),
      })
    }
    return { result, exited: proc.exit }
  }

  /** Store events in the workspace's log and push them to subscribers. */
  private async record(task: TaskRecord, events: RunnerEvent[]): Promise<void> {
    const placed = await this.o.eventLog.append(
      task.owner_id,
      task.workspace_id,
      events.map((e) => ({ ...e, task_id: task.id })),
    )
    if (placed.length) {
      const c = this.eventCounts.get(task.id)
      if (c) c.count += placed.length
      else this.eventCounts.set(task.id, { count: (task.event_count ?? 0) + placed.length, first: task.first_seq ?? placed[0]!.seq })
    }
    for (const event of placed) this.o.bus.publish({ type: 'task.event', task_id: task.id, event })
  }

  /** Release a session's container after the idle time; a playbook's (`pb-…`) at once, as no one is waiting to follow up. */
  private scheduleIdle(owner: string, wsId: string, sessionId: string): void {
    const warm = this.warm.get(wsId)
    if (!warm) return
    warm.timer = setTimeout(() => {
      // Not while a follow-up is running or waiting to.
      if (this.busy.has(wsId) || this.queue.some((t) => t.workspace_id === wsId)) return
      void this.detachWorkspace(owner, wsId, { keepConversation: true })
        .then((lease) => lease?.release())
        .catch((err) => this.o.logger.warn('could not release a session', { workspace: wsId, error: String(err) }))
    }, sessionId.startsWith('pb-') ? 0 : (this.o.sessionIdleMs ?? 15 * 60_000))
    warm.timer.unref?.()
  }

  /** Release a workspace's container (reaped), its concurrency slot, and mark it idle. */
  async releaseWorkspace(owner: string, wsId: string): Promise<void> {
    await (await this.detachWorkspace(owner, wsId))?.release()
  }

  /**
   * Free a workspace's concurrency slot and mark it idle; returns its container's lease for
   * the caller to release (reap) when convenient.
   */
  private detachWorkspace(owner: string, wsId: string, opts: DetachOptions = {}): Promise<Lease | undefined> {
    const done = this.detach(owner, wsId, opts)
    const tracked = done.catch(() => undefined).finally(() => {
      if (this.releasing.get(wsId) === tracked) this.releasing.delete(wsId)
    })
    this.releasing.set(wsId, tracked)
    return done
  }

  private async detach(owner: string, wsId: string, opts: DetachOptions): Promise<Lease | undefined> {
    const warm = this.warm.get(wsId)
    this.warm.delete(wsId)
    if (warm?.timer) clearTimeout(warm.timer)
    const ws = await this.o.workspaces.records.find(owner, wsId)
    // Without a volume the container's files go with it: keep the conversation at least.
    if (opts.keepConversation && warm && ws && !ws.volume && ws.sdk_session_id && this.o.engine) {
      await this.saveConversation(this.o.engine.runtime, warm.lease, ws).catch((err) =>
        this.o.logger.warn('could not keep a session conversation', { workspace: wsId, error: String(err) }),
      )
    }
    // Without a volume the files go with the container: copy them out first, so they stay readable.
    if (warm && ws && !ws.volume && this.o.engine && this.o.snapshots) {
      await this.o.snapshots
        .save(this.o.engine.runtime, warm.lease.container.engine_id, owner, wsId)
        .catch((err) => this.o.logger.warn('could not keep a workspace’s files', { workspace: wsId, error: String(err) }))
    }
    if (ws) await this.o.workspaces.setStatus(owner, wsId, 'idle', { container_id: null })
    // A follow-up already queued or starting keeps the workspace's slot: it runs next.
    // (A run releasing its own workspace is the busy one itself.)
    const followUp = (!opts.fromRun && this.busy.has(wsId)) || this.queue.some((t) => t.workspace_id === wsId)
    if (ws?.profile_id && !followUp) {
      this.o.slots.release(ws.profile_id, wsId)
      // A task waiting for this profile's slot may start now.
      queueMicrotask(() => this.pump())
    }
    return warm?.lease
  }

  /** A cancelled queued task may leave a workspace that never started: free its slot. */
  private async releaseIfUnused(t: TaskRecord): Promise<void> {
    if (this.busy.has(t.workspace_id) || this.warm.has(t.workspace_id) || this.queue.some((q) => q.workspace_id === t.workspace_id)) return
    await this.releaseWorkspace(t.owner_id, t.workspace_id)
  }

  /** Tar the conversation directory out of a session's container into the store. */
  private async saveConversation(runtime: ContainerRuntime, lease: Lease, ws: WorkspaceRecord): Promise<void> {
    const chunks: Uint8Array[] = []
    let size = 0
    const reader = (await runtime.getArchive(lease.container.engine_id, CONVERSATION_DIR)).getReader()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      size += value.byteLength
      if (size > MAX_CONVERSATION_BYTES) {
        await reader.cancel()
        this.o.logger.warn('session conversation too large to keep', { workspace: ws.id, bytes: size })
        return
      }
      chunks.push(value)
    }
    await this.o.store.set(`ws-conversations:${ws.owner_id}:${ws.id}`, { tar: Buffer.concat(chunks).toString('base64') })
  }

  /** Put a kept conversation back into a new container before the follow-up resumes it. */
  private async restoreConversation(runtime: ContainerRuntime, lease: Lease, ws: WorkspaceRecord): Promise<boolean> {
    const saved = await this.o.store.get<{ tar: string }>(`ws-conversations:${ws.owner_id}:${ws.id}`)
    if (!saved) return false
    await runtime.putArchive(lease.container.engine_id, WORKSPACE_DIR, new Uint8Array(Buffer.from(saved.tar, 'base64')))
    return true
  }

  /** Cancel everything of a workspace and release it (workspace deletion). */
  async stopWorkspace(owner: string, wsId: string): Promise<void> {
    for (const t of this.queue.filter((q) => q.workspace_id === wsId)) await this.cancel(owner, t.id)
    for (const [id, run] of this.running) {
      const t = await this.records.find(owner, id)
      if (t?.workspace_id === wsId) {
        run.abort.abort()
        await run.done
      }
    }
    await this.releaseWorkspace(owner, wsId)
  }

  /**
   * After a restart: queued tasks go back in the queue; a task that was starting or
   * running gets the result its runner wrote to the workspace's event file (waiting up to
   * `recoveryGraceMs` for a runner still at work), or fails with CONTAINER_FAILED; warm
   * sessions keep their container; every other workspace that was running goes idle.
   */
  async recover(): Promise<void> {
    const refs = await this.o.store.keys('active-tasks:')
    const owners = await this.o.store.getMany<{ owner: string }>(refs)
    const tasks: TaskRecord[] = []
    for (let i = 0; i < refs.length; i++) {
      const t = owners[i] && (await this.records.find(owners[i]!.owner, refs[i]!.slice('active-tasks:'.length)))
      if (t && ACTIVE.includes(t.status)) tasks.push(t)
      else await this.o.store.remove(refs[i]!)
    }
    const pool = this.o.engine?.pool
    const leases = new Map((pool?.list() ?? []).filter((c) => c.state === 'in_use' && c.workspace_id).map((c) => [c.workspace_id!, c]))
    // Warm containers come back with their workspaces.
    for (const [wsId, c] of leases) this.warm.set(wsId, { lease: pool!.leaseOf(c.id), timer: null })

    const interrupted = tasks.filter((t) => t.status !== 'queued')
    await Promise.all(interrupted.map((t) => this.recoverRun(t)))

    for (const t of tasks.filter((x) => x.status === 'queued').sort((a, b) => (a.created_at < b.created_at ? -1 : 1))) {
      if (!t.slot_pending) {
        try {
          this.o.slots.acquire(t.profile_id, t.workspace_id)
        } catch {
          t.slot_pending = true
        }
      }
      this.queue.push(t)
    }
    for (const ws of await this.o.workspaces.allWithStatus(['running', 'starting'])) {
      const warm = this.warm.get(ws.id)
      if (warm) warm.profile_id = ws.profile_id
      if (warm && ws.profile_id) {
        this.o.slots.acquire(ws.profile_id, ws.id)
        if (!this.queue.some((t) => t.workspace_id === ws.id)) this.scheduleIdle(ws.owner_id, ws.id, ws.session_id)
      } else if (!this.queue.some((t) => t.workspace_id === ws.id)) {
        await this.o.workspaces.setStatus(ws.owner_id, ws.id, 'idle', { container_id: null })
      }
    }
    await this.recoverVolumes()
  }

  /** Volumes are accounted for like containers: those of deleted workspaces go. */
  private async recoverVolumes(): Promise<void> {
    const engine = this.o.engine
    if (!engine) return
    const exists = async (owner: string, wsId: string) => (await this.o.workspaces.records.find(owner, wsId)) !== null
    await recoverVolumes(engine.runtime, engine.pool.name, exists, this.o.logger).catch((err: unknown) =>
      this.o.logger.warn('could not account for volumes', { error: String(err) }),
    )
  }

  private async recoverRun(t: TaskRecord): Promise<void> {
    const engine = this.o.engine
    const warm = this.warm.get(t.workspace_id)
    let result: ResultEvent | null = null
    let events: RunnerEvent[] = []
    if (engine && warm) {
      // Real time, not the injectable clock: this is how long the server waits, not a business rule.
      const deadline = performance.now() + (this.o.recoveryGraceMs ?? 30_000)
      for (;;) {
        events = await this.readEventFile(engine.runtime, warm.lease.container.engine_id, t.id).catch(() => [])
        result = (events.find((e) => e.type === 'result') as ResultEvent | undefined) ?? null
        const alive = await engine.runtime
          .inspect(warm.lease.container.engine_id)
          .then((i) => i.running)
          .catch(() => false)
        if (result || !alive || performance.now() >= deadline) break
        await new Promise((r) => setTimeout(r, 500))
      }
    }
    // Whatever the log missed (events after its last flush) comes from the runner's file.
    const stored = await this.o.eventLog.read(t.owner_id, t.workspace_id, { after: 0, limit: 1_000_000, taskId: t.id })
    if (stored.length) this.eventCounts.set(t.id, { count: stored.length, first: stored[0]!.seq })
    if (events.length > stored.length) await this.record(t, events.slice(stored.length))
    if (result) {
      if (result.session_id) await this.o.workspaces.patch(t.owner_id, t.workspace_id, { sdk_session_id: result.session_id })
      await this.finish(t, endOf(result))
    } else {
      await this.finish(t, {
        status: 'failed',
        error: { code: 'CONTAINER_FAILED', error: 'The server restarted while the task was running and its runner left no result' },
      })
    }
    // Batch containers are reaped; a session keeps a container that survived.
    if (t.mode === 'batch' || !result) await this.releaseWorkspace(t.owner_id, t.workspace_id)
  }

  /** The runner's event file inside a container, parsed. */
  private async readEventFile(runtime: ContainerRuntime, engineId: string, taskId: string): Promise<RunnerEvent[]> {
    const { exitCode, stdout } = await collectExec(await runtime.exec(engineId, { cmd: ['cat', eventsFile(taskId)] }))
    if (exitCode !== 0) return []
    return stdout
      .split('\n')
      .flatMap((line) => {
        try {
          const e = v.safeParse(RunnerEvent, JSON.parse(line))
          return e.success ? [e.output] : []
        } catch {
          return []
        }
      })
  }

  /** Stop taking work; running tasks are left to a restart's recovery. Containers stay. */
  async close(): Promise<void> {
    this.closed = true
    for (const w of this.warm.values()) if (w.timer) clearTimeout(w.timer)
    await this.o.engine?.warmAgents?.close()
    await this.o.eventLog.flushAll()
  }
}

/** The codes a failed task may carry: the schema's own list. */
const TASK_ERROR_CODES: readonly string[] = TaskError.entries.code.options

/** How a runner result ends its task: completed, or failed with the outcome's code and the partial result. */
function endOf(result: ResultEvent): { status: 'completed' | 'failed'; result: TaskResult; error?: TaskError } {
  const taskResult: TaskResult = {
    text: result.text,
    tool_calls: result.tool_calls,
    input_tokens: result.input_tokens,
    output_tokens: result.output_tokens,
    cost_usd: result.cost_usd,
    turns: result.turns,
  }
  if (result.outcome === 'success') return { status: 'completed', result: taskResult }
  return { status: 'failed', result: taskResult, error: { code: OUTCOME_ERROR[result.outcome], error: result.error ?? result.outcome } }
}

function redactAll(text: string, values: string[]): string {
  let out = text
  const forms = [...new Set(values.flatMap(secretForms))].sort((a, b) => b.length - a.length)
  for (const v of forms) if (v) out = out.split(v).join('[REDACTED]')
  return out
}
