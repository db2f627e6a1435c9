import type { ForkWorkspace, Task, Workspace } from '@berth/contract'
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
   * session with a copy of the workspace's files and of the conversation so far, with the
   * same options. The original goes on unchanged.
   */
  fork(options?: { atTaskId?: string }): Promise<Session>
}

/** What a session needs from the client. */
export interface SessionDeps {
  run(body: RunTaskBody, options: RunOptions): Promise<Task>
  deleteWorkspace(workspaceId: string): Promise<unknown>
  forkWorkspace(workspaceId: string, body: ForkWorkspace): Promise<Workspace>
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
      await queue
      if (!workspaceId) throw new Error('Nothing to fork yet: send a prompt first')
      const fork = await deps.forkWorkspace(workspaceId, opts.atTaskId ? { at_task_id: opts.atTaskId } : {})
      return startSession(deps, { ...options, session_id: fork.session_id })
    },
  }
}
