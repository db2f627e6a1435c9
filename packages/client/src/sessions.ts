import type { Checkpoint, ForkWorkspace, LivingAgent, Task, Workspace } from '@berth/contract'
import type { SubmitTaskInput } from './socket.js'
import type { RunOptions, RunTaskBody } from './tasks/run.js'

/** Options of `sessions.start`: the profile, and defaults for every prompt of the session. */
export type SessionOptions = Omit<SubmitTaskInput, 'mode' | 'prompt'>

/** Per-prompt options of {@link Session.send}: run options, and submit fields for this prompt. */
export type SendOptions = RunOptions &
  Partial<
    Pick<
      SubmitTaskInput,
      | 'allowed_tools'
      | 'max_turns'
      | 'max_budget_usd'
      | 'priority'
      | 'require_approval'
      | 'approval_timeout_s'
      | 'output_schema'
    >
  >

/** A conversation in one warm workspace; see `sessions.start`. */
export interface Session {
  /** The session id (`sess_…`): set by the first prompt, or given to `start` to continue one. */
  readonly id: string | undefined
  /** The session's workspace, once the first prompt was submitted. */
  readonly workspaceId: string | undefined
  /** The finished tasks of this session object, oldest first. */
  readonly tasks: readonly Task[]
  /**
   * Send one prompt and wait for its task to finish (the same session, container and
   * workspace as the prompts before). Prompts sent while one runs wait their turn.
   */
  send(prompt: string, options?: SendOptions): Promise<Task>
  /**
   * Stop using the session: a prompt still running is cancelled, later `send`s reject.
   * The workspace and its files stay (the server releases the container when idle);
   * `{ deleteWorkspace: true }` deletes it for good.
   */
  close(options?: { deleteWorkspace?: boolean }): Promise<void>
  /**
   * Fork the session once its prompts have finished (`POST /v1/workspaces/:id/fork`): a new
   * session with the same options, holding a copy of the workspace's files and of the
   * conversation so far, or at `atTaskId`, one of its finished tasks. The original goes on
   * unchanged.
   *
   * @example
   * ```ts
   * const other = await s.fork({ atTaskId: s.tasks[0]!.task_id })
   * await other.send('Try it the other way')
   * ```
   */
  fork(options?: { atTaskId?: string }): Promise<Session>
  /**
   * The session's living agent once its prompts have finished (`agent` of
   * `GET /v1/workspaces/:id`): since when it runs, how many tasks it served and what it left
   * running in the background (servers, watchers, builds). `null` while no agent lives: the
   * next prompt starts one and resumes the conversation.
   *
   * @example
   * ```ts
   * await s.send('Start the dev server in the background')
   * for (const b of (await s.agent())?.background ?? []) console.log(b.kind, b.description, b.since)
   * ```
   */
  agent(): Promise<LivingAgent | null>
  /**
   * Stop the session now, once its prompts have finished (`POST /v1/workspaces/:id/stop`):
   * its living agent and everything it runs in the background end and its container is
   * released; files and conversation are kept, and the next `send` resumes them. Resolves
   * with the workspace (`status: 'idle'`, `agent: null`).
   *
   * @example
   * ```ts
   * await s.send('Start the dev server in the background')
   * await s.stop() // the server is gone; the conversation is not
   * ```
   */
  stop(): Promise<Workspace>
  /**
   * The session's checkpoints once its prompts have finished (`GET /v1/workspaces/:id/checkpoints`),
   * oldest first: the finished tasks it can be forked at or rewound to, with their size.
   *
   * @example
   * ```ts
   * const [first] = await s.checkpoints()
   * await s.rewind(first!.task_id)
   * ```
   */
  checkpoints(): Promise<Checkpoint[]>
  /**
   * Take the session itself back to one of its finished tasks, once its prompts have
   * finished (`POST /v1/workspaces/:id/rewind`): its files and conversation become that
   * task's checkpoint, its living agent ends, and the next `send` goes on from there. The
   * later tasks stay in `tasks` and the transcript, marked `rewound_at` on the server.
   *
   * @example
   * ```ts
   * await s.send('Write a.txt')
   * await s.send('Delete it')
   * await s.rewind(s.tasks[0]!.task_id) // a.txt is back, and the agent remembers only the first prompt
   * ```
   */
  rewind(taskId: string): Promise<Workspace>
}

/** What a session needs from the client. */
export interface SessionDeps {
  run(body: RunTaskBody, options: RunOptions): Promise<Task>
  deleteWorkspace(workspaceId: string): Promise<unknown>
  forkWorkspace(workspaceId: string, body: ForkWorkspace): Promise<Workspace>
  getWorkspace(workspaceId: string): Promise<Workspace>
  stopWorkspace(workspaceId: string): Promise<Workspace>
  rewindWorkspace(workspaceId: string, taskId: string): Promise<Workspace>
  listCheckpoints(workspaceId: string): Promise<Checkpoint[]>
}

/**
 * A session helper: each `send` runs a `session` task continuing the one before.
 *
 * @example
 * ```ts
 * const s = startSession(deps, { profile_id })
 * await s.send('Remember the number 7')
 * const answer = await s.send('Which number?')
 * await s.close()
 * ```
 */
export function startSession(deps: SessionDeps, options: SessionOptions): Session {
  let id = options.session_id
  let workspaceId: string | undefined
  let closed = false
  let queue: Promise<unknown> = Promise.resolve()
  const tasks: Task[] = []
  const running = new Set<AbortController>()

  async function one(prompt: string, opts: SendOptions): Promise<Task> {
    if (closed) throw new Error('This session was closed')
    // The run's own options; the rest are submit fields.
    const { signal, onEvent, onSubmitted, onPermissionRequest, onDecisionError, requestId, cancelOnAbort, ...fields } =
      opts
    const controller = new AbortController()
    const onAbort = () => controller.abort(signal?.reason)
    if (signal?.aborted) onAbort()
    signal?.addEventListener('abort', onAbort, { once: true })
    running.add(controller)
    try {
      const task = await deps.run(
        { ...options, ...fields, mode: 'session', prompt, session_id: id },
        {
          signal: controller.signal,
          onEvent,
          onSubmitted,
          onPermissionRequest,
          onDecisionError,
          requestId,
          cancelOnAbort,
        },
      )
      id ??= task.session_id ?? undefined
      workspaceId ??= task.workspace_id ?? undefined
      tasks.push(task)
      return task
    } finally {
      running.delete(controller)
      signal?.removeEventListener('abort', onAbort)
    }
  }

  /** The workspace once the prompts sent so far have finished. */
  async function settled(what: string): Promise<string> {
    await queue
    if (!workspaceId) throw new Error(`Nothing to ${what} yet: send a prompt first`)
    return workspaceId
  }

  return {
    get id() {
      return id
    },
    get workspaceId() {
      return workspaceId
    },
    tasks,
    send(prompt, opts = {}) {
      const result = queue.then(() => one(prompt, opts))
      queue = result.catch(() => {})
      return result
    },
    async close(opts = {}) {
      closed = true
      for (const c of running) c.abort()
      await queue
      if (opts.deleteWorkspace && workspaceId) await deps.deleteWorkspace(workspaceId)
    },
    async fork(opts = {}) {
      const fork = await deps.forkWorkspace(await settled('fork'), opts.atTaskId ? { at_task_id: opts.atTaskId } : {})
      return startSession(deps, { ...options, session_id: fork.session_id })
    },
    async agent() {
      return (await deps.getWorkspace(await settled('read'))).agent
    },
    async stop() {
      return deps.stopWorkspace(await settled('stop'))
    },
    async checkpoints() {
      return deps.listCheckpoints(await settled('list'))
    },
    async rewind(taskId) {
      return deps.rewindWorkspace(await settled('rewind'), taskId)
    },
  }
}
