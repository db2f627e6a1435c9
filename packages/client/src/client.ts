import type { Approval, Checkpoint, Task, Workspace } from '@berth/contract'
import {
  normalizeUpload,
  uploadForm,
  type FileListing,
  type UploadFile,
  type UploadOptions,
  type UploadResult,
} from './files.js'
import { createTransport, type RawInput, type Transport } from './internal/transport.js'
import { paginateList, type Paginate } from './paginate.js'
import { startSession, type Session, type SessionOptions } from './sessions.js'
import { createBerthSocket, type BerthSocket, type BerthSocketOptions, type SubmitTaskInput } from './socket.js'
import { hasGlobalWebSocket } from './socket-connect.js'
import {
  createTaskStream,
  EVENTS_PAGE,
  followTask,
  type StreamOptions,
  type TaskEvent,
  type TaskStream,
} from './tasks/follow.js'
import { runTask, type RunOptions, type RunTaskBody } from './tasks/run.js'
import type { SteerDeps, SteerHelpers } from './tasks/steer.js'
import { buildTree, type RouteTree } from './tree.js'
import type { BerthClientOptions } from './options.js'
import type { CallOptions, RouteArgs, RouteName, RouteOutput } from './types.js'

export type { BerthClientOptions }

/**
 * `tasks.run`, `tasks.stream` and the steering helpers, beside the route methods of `tasks`
 * (`tasks.interrupt` also takes the route's `{ params: { id } }`; `tasks.approvals.list`
 * and `tasks.approvals.decide` stay reachable under `tasks.approvals`).
 */
export interface TaskHelpers extends SteerHelpers {
  /**
   * Submit a task and wait until it is finished; resolves with the task whatever its
   * status (`result`, or `error: { code, error }`). `onEvent` gets every event as it happens.
   *
   * @example
   * ```ts
   * const task = await berth.tasks.run({ profile_id, prompt: 'Hello' }, { onEvent: (e) => e.type === 'token' && process.stdout.write(e.text) })
   * ```
   */
  run(body: RunTaskBody, options?: RunOptions): Promise<Task>
  /**
   * A task's events as an `AsyncIterable` that resumes after a dropped connection from the
   * last `seq` it delivered (no gap, no repeat) and ends when the task is finished.
   *
   * @example
   * ```ts
   * for await (const event of berth.tasks.stream(taskId)) if (event.type === 'tool_call') console.log(event.name)
   * ```
   */
  stream(taskId: string, options?: StreamOptions): TaskStream
}

/** `sessions.start`. */
export interface SessionHelpers {
  /**
   * A conversation: each `send(prompt)` continues the same session, container and workspace.
   * Pass `session_id` to continue an existing one.
   *
   * @example
   * ```ts
   * const s = berth.sessions.start({ profile_id })
   * await s.send('Remember 7')
   * console.log((await s.send('Which number?')).result?.text)
   * await s.close()
   * ```
   */
  start(options: SessionOptions): Session
}

/** Workspace files: list, upload (multipart), download (tar). */
export interface FileHelpers<Upload = UploadFile> {
  /**
   * List a directory of a workspace (default `/workspace`).
   *
   * @example
   * ```ts
   * const { entries } = await berth.files.list(workspaceId, 'src')
   * ```
   */
  list(workspaceId: string, path?: string, options?: CallOptions): Promise<FileListing>
  /**
   * Upload one or more files into a directory of the workspace (created when missing).
   *
   * @example
   * ```ts
   * await berth.files.upload(workspaceId, { name: 'data.bin', data: new Uint8Array([1, 2, 3]) }, { dir: 'inputs' })
   * ```
   */
  upload(workspaceId: string, files: Upload | readonly Upload[], options?: UploadOptions): Promise<UploadResult>
  /**
   * Download files and directories as one tar archive, streamed (entry names relative to
   * `/workspace`).
   *
   * @example
   * ```ts
   * const tar = await berth.files.download(workspaceId, ['src', 'README.md'])
   * ```
   */
  download(
    workspaceId: string,
    paths: string | readonly string[],
    options?: { signal?: AbortSignal },
  ): Promise<ReadableStream<Uint8Array>>
}

/** The typed client: one method per operation nested by its dotted name, `request`, and the helpers. */
export type BerthClient = RouteTree & {
  /**
   * Call any operation by name; the same as the nested method.
   *
   * @example
   * ```ts
   * const profile = await client.request('profiles.get', { params: { id } })
   * ```
   */
  request<N extends RouteName>(name: N, ...args: RouteArgs<N>): Promise<RouteOutput<N>>
  /**
   * Every item of a list operation, page after page by cursor (`next_cursor`), as an
   * `AsyncIterable`; the query's filters and `limit` apply to every page.
   *
   * @example
   * ```ts
   * for await (const task of client.paginate('tasks.list', { query: { status: 'completed', limit: 100 } })) console.log(task.task_id)
   * ```
   */
  paginate: Paginate
  tasks: TaskHelpers
  sessions: SessionHelpers
  files: FileHelpers
  /**
   * A new reconnecting WebSocket to this server (same token), for the raw messages.
   *
   * @example
   * ```ts
   * const socket = berth.socket()
   * const { task_id } = await socket.submit({ mode: 'batch', profile_id, prompt: 'Hi' })
   * ```
   */
  socket(options?: Pick<BerthSocketOptions, 'reconnect'>): BerthSocket
}

/** The helpers' building blocks, for entry points that extend them (`@berth/client/node`). */
export interface ClientInternals {
  transport: Transport
  upload(
    workspaceId: string,
    files: readonly { name: string; blob: Blob }[],
    options?: UploadOptions,
  ): Promise<UploadResult>
}

function define(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: false, configurable: true, writable: false })
}

type Call = (name: string, input?: RawInput, opts?: CallOptions) => Promise<unknown>

// The steering helpers take a task id where the route methods take `{ params }`; the two
// that share a name with the route tree keep its form working too.
function defineSteering(tasks: Record<string, unknown>, steer: SteerDeps, call: Call): void {
  const helpers: SteerHelpers = {
    approve: (taskId, requestId, o = {}) => steer.decide(taskId, requestId, { decision: 'allow', ...o }),
    deny: (taskId, requestId, o = {}) => steer.decide(taskId, requestId, { decision: 'deny', ...o }),
    interrupt: (taskId) => steer.interrupt(taskId),
    send: (taskId, text) => steer.send(taskId, text) as Promise<{ task_id: string; accepted: true }>,
    approvals: async (taskId) =>
      ((await call('tasks.approvals.list', { params: { id: taskId } })) as { approvals: Approval[] }).approvals,
  }
  const routeInterrupt = tasks.interrupt as (input: RawInput, o?: CallOptions) => Promise<Task>
  define(tasks, 'interrupt', (input: string | RawInput, o?: CallOptions) =>
    typeof input === 'string' ? helpers.interrupt(input) : routeInterrupt(input, o),
  )
  const group = tasks.approvals as Record<string, unknown>
  const approvals = (taskId: string) => helpers.approvals(taskId)
  for (const key of Object.keys(group)) define(approvals, key, group[key])
  define(tasks, 'approvals', approvals)
  for (const key of ['approve', 'deny', 'send'] as const) define(tasks, key, helpers[key])
}

/**
 * Build a client and hand its internals to `extend` (used by `@berth/client/node`).
 *
 * @example
 * ```ts
 * const client = buildClient(options, ({ transport }) => {})
 * ```
 */
export function buildClient(
  options: BerthClientOptions,
  extend?: (client: BerthClient, internals: ClientInternals) => void,
): BerthClient {
  const transport = createTransport(options)
  const call = (name: string, input?: RawInput, opts?: CallOptions) =>
    transport.call(transport.route(name), input, opts)
  const tree = buildTree(transport.names(), (name) => {
    const route = transport.route(name)
    return (input?: RawInput, opts?: CallOptions) => transport.call(route, input, opts)
  })
  define(tree, 'paginate', (name: string, input?: RawInput, opts?: CallOptions) =>
    paginateList(call, name, input, opts),
  )
  define(tree, 'request', (name: string, input?: RawInput, opts?: CallOptions) => {
    try {
      return transport.call(transport.route(name), input, opts)
    } catch (err) {
      return Promise.reject(err)
    }
  })

  const connect = typeof options.websocket === 'function' ? options.websocket : undefined
  const canSocket = options.websocket !== false && (connect !== undefined || hasGlobalWebSocket())
  const openSocket = (reconnect: BerthSocketOptions['reconnect'] = options.reconnect ?? { retries: 3 }) =>
    createBerthSocket({
      baseURL: options.baseURL,
      token: options.token,
      connect,
      reconnect,
    })
  const maybeSocket = () => (canSocket ? openSocket() : undefined)

  const followDeps = {
    get: (taskId: string, signal: AbortSignal | undefined) =>
      call('tasks.get', { params: { id: taskId } }, signal && { signal }) as Promise<Task>,
    events: async (taskId: string, after: number, signal: AbortSignal | undefined) => {
      const page = (await call(
        'tasks.events',
        { params: { id: taskId }, query: { after, limit: EVENTS_PAGE } },
        signal && { signal },
      )) as { events: TaskEvent[] }
      return page.events
    },
    socket: maybeSocket,
    pollInterval: options.pollInterval ?? 1000,
  }
  const steer: SteerDeps = {
    decide: (taskId, requestId, body, signal) =>
      call(
        'tasks.approvals.decide',
        { params: { id: taskId, request_id: requestId }, body },
        signal && { signal },
      ) as Promise<Approval>,
    interrupt: (taskId) => call('tasks.interrupt', { params: { id: taskId } }) as Promise<Task>,
    send: (taskId, text) => call('tasks.messages.send', { params: { id: taskId }, body: { text } }),
  }
  const run = (body: RunTaskBody, runOptions?: RunOptions) =>
    runTask(
      {
        socket: maybeSocket,
        submit: (task: SubmitTaskInput, signal) =>
          call('tasks.submit', { body: task }, signal && { signal }) as Promise<{ task_id: string }>,
        follow: (taskId, o) => followTask(followDeps, taskId, o),
        cancel: (taskId) => call('tasks.cancel', { params: { id: taskId } }),
        steer,
      },
      body,
      runOptions,
    )
  const tasks = (tree as Record<string, object>).tasks!
  define(tasks, 'run', run)
  define(tasks, 'stream', (taskId: string, streamOptions?: StreamOptions) =>
    createTaskStream((o) => followTask(followDeps, taskId, o), taskId, streamOptions ?? {}, steer),
  )
  defineSteering(tasks as Record<string, unknown>, steer, call)
  define(tree, 'sessions', {
    start: (sessionOptions: SessionOptions) =>
      startSession(
        {
          run,
          deleteWorkspace: (id) => call('workspaces.delete', { params: { id } }),
          forkWorkspace: (id, body) => call('workspaces.fork', { params: { id }, body }) as Promise<Workspace>,
          getWorkspace: (id) => call('workspaces.get', { params: { id } }) as Promise<Workspace>,
          stopWorkspace: (id) => call('workspaces.stop', { params: { id } }) as Promise<Workspace>,
          rewindWorkspace: (id, taskId) =>
            call('workspaces.rewind', { params: { id }, body: { to_task_id: taskId } }) as Promise<Workspace>,
          listCheckpoints: async (id) =>
            ((await call('workspaces.checkpoints', { params: { id } })) as { checkpoints: Checkpoint[] }).checkpoints,
        },
        sessionOptions,
      ),
  })

  const upload: ClientInternals['upload'] = async (workspaceId, files, o = {}) =>
    (await transport.call(
      transport.route('workspaces.files.upload'),
      { params: { id: workspaceId } },
      o.signal && { signal: o.signal },
      { body: await uploadForm(files, o.dir ?? '.') },
    )) as UploadResult
  const files: FileHelpers = {
    list: (workspaceId, path = '', o) =>
      call('workspaces.files.list', { params: { id: workspaceId }, query: { path } }, o) as Promise<FileListing>,
    upload: async (workspaceId, input, o) =>
      upload(
        workspaceId,
        await Promise.all((Array.isArray(input) ? input : [input]).map((f: UploadFile) => normalizeUpload(f))),
        o,
      ),
    download: async (workspaceId, paths, o = {}) =>
      (await transport.call(
        transport.route('workspaces.files.download'),
        { params: { id: workspaceId }, query: { path: typeof paths === 'string' ? [paths] : [...paths] } },
        o.signal && { signal: o.signal },
        { stream: true },
      )) as ReadableStream<Uint8Array>,
  }
  define(tree, 'files', files)
  define(tree, 'socket', (o: Pick<BerthSocketOptions, 'reconnect'> = {}) =>
    openSocket(o.reconnect ?? options.reconnect),
  )

  const client = tree as unknown as BerthClient
  extend?.(client, { transport, upload })
  return client
}

/**
 * Create a typed Berth client. Every operation of the route table is a method nested by
 * its name, with input and output types from the route's schemas. On top of them:
 * `tasks.run` (submit and wait), `tasks.stream` (events as an `AsyncIterable`),
 * `sessions.start` (follow-up prompts), `files` (upload, download) and `socket()`. Failed
 * calls reject with a `BerthError`; idempotent calls (GET, PUT, DELETE, HEAD, OPTIONS) are
 * retried on network errors, timeouts, 429, 502, 503 and 504, honouring `Retry-After`.
 * This entry is browser-safe; in Node 20 import `@berth/client/node` (WebSocket via `ws`,
 * files from paths, downloads extracted into a directory).
 *
 * @example
 * ```ts
 * const berth = createBerthClient({ baseURL: 'http://127.0.0.1:3000', token: process.env.BERTH_TOKEN })
 * const key = await berth.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
 * const profile = await berth.profiles.create({ body: { name: 'Docs', slug: 'docs', api_key_id: key.id } })
 * const task = await berth.tasks.run({ profile_id: profile.id, prompt: 'Hello' })
 * console.log(task.result?.text)
 * ```
 */
export function createBerthClient(options: BerthClientOptions): BerthClient {
  return buildClient(options)
}
