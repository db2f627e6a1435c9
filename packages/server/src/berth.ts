import {
  ApiError,
  ContainerPool,
  WarmAgents,
  defaultPoolName,
  createAesGcmCipher,
  createPipeline,
  createServices,
  deriveOAuthStateKey,
  errorResponse,
  jsonLogger,
  routes as coreRoutes,
  systemClock,
  tokenBucket,
  type AnyRoute,
  type Authenticate,
  type Clock,
  type ContainerRuntime,
  type ContainerSpec,
  type PooledContainer,
  type PoolOptions,
  type Logger,
  type ModelCatalog,
  type RateLimiter,
  type Services,
  type Store,
  DEFAULT_ENVIRONMENT_CAPS,
  type EnvironmentCaps,
  type ImageRecipe,
} from '@berth/core'
import { environmentImages } from './environment-images.js'
import { H3, getRouterParams, type H3Event } from 'h3'
import { toNodeHandler } from 'h3/node'
import { FastResponse } from 'srvx/node'
import type { Storage } from 'unstorage'
import { resolve } from 'node:path'
import { loadEncryptionKey } from './encryption-key.js'
import { createGitProviders, type GitProvidersConfig } from './git/providers.js'
import { createNotifier } from './notifiers/index.js'
import type { Resolve } from './notifiers/address-policy.js'
import { createChatProvider, type ChatProviderConfig } from './notifiers/chat-provider.js'
import { createMailProvider, type MailProviderConfig } from './notifiers/mail-provider.js'
import type { SmtpOptions } from './notifiers/email.js'
import { createBankApi, type BankApiOptions } from './notifiers/bank-api.js'
import { createMessengerApi, type MessengerApiOptions } from './notifiers/messenger-api.js'
import { serverRoutes } from './routes.js'
import { unstorageStore } from './store.js'
import { mountConsole } from './console.js'
import { embeddedStore } from './storage/embedded.js'
import { storageView } from './storage/unstorage-view.js'
import { createWebSocket } from './websocket.js'
import { VERSION } from './version.js'

/** Options of {@link createBerth}. Every field has an embedded default. */
export interface BerthOptions {
  /**
   * Where records live: a `Store` (`sqliteStore`, `memoryStore`, `redisStore`). Default:
   * SQLite at `<dataDir>/berth.db`, after migrating a `<dataDir>/store` fs layout once.
   */
  store?: Store
  /** Or an unstorage instance (any driver); its list indexes are derived from the records. */
  storage?: Storage
  /**
   * Cache reads in memory. Default: on for the embedded fs storage (this process is its
   * only writer), off for a storage you pass in (it may be shared by several instances).
   */
  cacheReads?: boolean
  /** Where the embedded store and the generated encryption key live. Default `./.data`. */
  dataDir?: string
  /** 32-byte key (base64 or hex) for encryption at rest. Default: generated into `dataDir`. */
  encryptionKey?: string
  /** Operator token for `/admin/*` and force-remove (`BERTH_ADMIN_TOKEN`). Default: none. */
  adminToken?: string
  /** Replace bearer-key authentication with the embedding app's own. */
  authenticate?: Authenticate
  /** Per-caller token bucket (default `{ rpm: 60, burst: 10 }`), or a limiter of your own. */
  rateLimit?: { rpm: number; burst: number } | RateLimiter
  /** JSON body limit in bytes (default 1 MiB). */
  bodyLimit?: number
  /** Upload limit in bytes: the whole multipart body of `POST /v1/workspaces/:id/files` (default 100 MiB); 413 beyond. */
  uploadLimit?: number
  /** Validate every response against its schema (on in tests; a mismatch is a 500). */
  validateResponses?: boolean
  clock?: Clock
  /** Structured logger. Default: JSON lines on stderr. */
  logger?: Logger
  catalog?: ModelCatalog
  /** The container engine (see `@berth/adapter-docker`, `-podman`, `-local`). Without one, no pool. */
  runtime?: ContainerRuntime
  /**
   * How the agent runner starts in a task container. Default: `['berth-runner']` (the
   * production image has it installed). With `bundleDir`, a self-contained runner directory
   * on the host (see `@berth/runner`) is mounted read-only at `/opt/berth-runner` and run
   * from there, so any image with Node 20 works.
   */
  runner?: { command?: string[]; bundleDir?: string }
  /** Running workspaces per profile (`BERTH_CONCURRENCY`, default 5). */
  concurrency?: number
  /** A session's container is released after this long without a prompt (default 15 min). */
  sessionIdleMs?: number
  /** After a restart, how long to wait for a runner still at work to finish (default 30 s). */
  recoveryGraceMs?: number
  /**
   * Files of a workspace without a volume (batch tasks) are copied out when its container
   * is released and stay readable for `retentionMs` (default 7 days; `null`: until the
   * workspace is deleted), up to `maxBytes` per workspace (default 50 MiB).
   */
  workspaceFiles?: { retentionMs?: number | null; maxBytes?: number }
  /** The SMTP server `email` integrations send through. Without it, email deliveries fail with that reason. */
  smtp?: SmtpOptions
  /**
   * Let `webhook` integrations reach private, loopback and link-local addresses (default
   * false: such URLs are refused when saved and at every delivery, so callers cannot make
   * the server probe its own network). For local development and tests.
   */
  allowPrivateWebhooks?: boolean
  /**
   * Notification deliveries: tries per notification (default 5), first backoff (default 1 s,
   * doubling; retries are stored and survive a restart), per-attempt timeout (default 10 s),
   * and how webhook hosts resolve (`resolve`, default the system resolver; for tests).
   */
  notifications?: { attempts?: number; backoffMs?: number; timeoutMs?: number; resolve?: Resolve }
  /** Per-playbook limit of its webhook trigger (default `{ rpm: 60, burst: 10 }`). */
  playbookWebhookRate?: { rpm: number; burst: number }
  /**
   * Git providers callers can connect accounts from (OAuth apps you registered), e.g.
   * `{ github: { clientId, clientSecret } }`. Endpoints default to the public hosts; override
   * them for self-hosted instances. Providers left out cannot be connected.
   */
  gitProviders?: GitProvidersConfig
  /**
   * The chat-workspace provider app (Slack-shaped) callers connect `chatprovider`
   * integrations to: `{ clientId, clientSecret, signingSecret }`, endpoints defaulting to
   * slack.com (`authorizeUrl`, `tokenUrl`, `apiBaseUrl`). Without it the chat routes answer 404 / 401.
   */
  chatProvider?: ChatProviderConfig
  /**
   * The mail provider OAuth client (Gmail-shaped) callers connect `mailprovider`
   * integrations with: `{ clientId, clientSecret }`, endpoints defaulting to Google's
   * (`authorizeUrl`, `tokenUrl`, `apiBaseUrl`, `userinfoUrl`, `revokeUrl`).
   */
  mailProvider?: MailProviderConfig
  /**
   * The banking-data provider (Teller-shaped) whose connect widget callers enroll banks
   * with: `apiBaseUrl` (default `https://api.teller.io`), `timeoutMs` per request (default 10 s).
   */
  bankProvider?: Omit<BankApiOptions, 'fetch'>
  /**
   * The messenger (Telegram-shaped Bot API) callers' bots run on: `apiBaseUrl` (default
   * `https://api.telegram.org`), `publicUrl` (where the provider reaches this server's
   * `/api/messenger/webhook`; default: the setup request's origin, so set it behind a proxy),
   * `timeoutMs` per request (default 10 s).
   */
  messenger?: Omit<MessengerApiOptions, 'fetch'> & { publicUrl?: string }
  /** Serve the browser console at `/console` (`@berth/console`; default false, on in the standalone server). */
  console?: boolean
  /**
   * Environments: the operator's caps and defaults (default policy `public`, every policy
   * offered, 4 CPUs / 8 GiB / 4096 pids / 20 GiB at most), and how images with `packages`
   * are built (e.g. `(p) => hostImageRecipe({ packages: p })`; without it they are refused).
   */
  environments?: { caps?: EnvironmentCaps; recipe?: (packages: readonly string[]) => ImageRecipe }
  /** The user the agent runs as in containers of runtimes with isolation (default `1000:1000`; `root` opts out). */
  agentUser?: string
  /** Warm pool settings (needs `runtime`). */
  pool?: {
    /** Image task containers start from. */
    image: string
    /** Idle containers kept warm (default 0). */
    min?: number
    /** Containers at most (default 20). */
    max?: number
    /** Pool name, the `berth.pool` label: recovery touches only its own (default: `berth-` + a hash of the data dir). */
    name?: string
    /** Spec fields every container gets: limits, network, the runner mount. */
    spec?: Partial<ContainerSpec>
    /** Built when the image is missing and cannot be pulled (e.g. `hostImageRecipe()` from `@berth/adapter-docker`). */
    imageRecipe?: PoolOptions['imageRecipe']
    /** Backoff while the engine does not answer (default 1 s doubling to 30 s). */
    retry?: PoolOptions['retry']
    /**
     * Warm agents kept at most (default 0: off): pooled containers whose runner already
     * started Claude Code for the settings of a recent task, so the next task like it skips
     * the agent's start-up. Each holds a container (counted in `max`) until used or evicted.
     */
    warmAgents?: number
  }
}

/** A running Berth: mount `handler` in node:http/Express/Fastify, or call `fetch`. */
export interface Berth {
  /** The h3 app (for composing into another h3 app). */
  app: H3
  /** Web-standard handler: `Request` in, `Response` out. */
  fetch: (request: Request) => Promise<Response>
  /** Node `(req, res)` handler for node:http, Express 5 and Fastify 5. */
  handler: ReturnType<typeof toNodeHandler>
  /** The WebSocket (`/v1/ws`): pass a Node server's `upgrade` event here (`server.on('upgrade', berth.handleUpgrade)`). */
  handleUpgrade: ReturnType<typeof createWebSocket>['handleUpgrade']
  services: Services
  /** The mounted route table (core's routes plus the server's own). */
  routes: readonly AnyRoute[]
  /** The records' store, and an unstorage view of it (the `storage` passed in, if any). */
  store: Store
  storage: Storage
  /** The warm pool, when a runtime is configured. */
  pool: ContainerPool | undefined
  /** Agents started ahead of tasks, when `pool.warmAgents` is set. */
  warmAgents: WarmAgents | undefined
  /**
   * Resolves once start-up work is done: the pool has adopted or removed what a previous
   * run left and warmed up to `min`. Rejects when the engine cannot be reached.
   */
  ready: Promise<void>
  /**
   * Close every WebSocket with 1001 (going away) and accept no new one; `force` drops the
   * sockets of clients that never answered. A shutdown calls this before `server.close()`,
   * which otherwise waits for upgraded sockets forever.
   */
  closeWebSockets(opts?: { force?: boolean }): void
  /** Release storage and timers. Pooled containers stay for the next start to adopt. */
  close(opts?: { removeContainers?: boolean }): Promise<void>
}

/** A GET's answer as a HEAD answer: same status and headers, no body (a streamed one is cancelled). */
async function headOf(answer: Promise<Response>): Promise<Response> {
  const res = await answer
  await res.body?.cancel().catch(() => {})
  return new Response(null, { status: res.status, headers: res.headers })
}

/** Compile `/v1/profiles/:id` into a matcher for the 404/405 fallback. */
function pathMatcher(path: string): RegExp {
  const pattern = path
    .split('/')
    .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/')
  return new RegExp(`^${pattern}/?$`)
}

/**
 * Create a Berth server: the core route table mounted on h3 with uniform auth, rate
 * limits, validation and errors, storage through unstorage.
 *
 * @example
 * ```ts
 * import { createServer } from 'node:http'
 * const berth = createBerth({ dataDir: './.data', adminToken: process.env.BERTH_ADMIN_TOKEN })
 * createServer(berth.handler).listen(3000)
 * ```
 */
export function createBerth(options: BerthOptions = {}): Berth {
  const dataDir = resolve(options.dataDir ?? './.data')
  const clock = options.clock ?? systemClock
  const logger = options.logger ?? jsonLogger()
  const store = options.storage
    ? unstorageStore(options.storage, { cache: options.cacheReads ?? false })
    : (options.store ?? embeddedStore(dataDir, logger))
  const storage = options.storage ?? storageView(store)
  const key = loadEncryptionKey({ configured: options.encryptionKey, dataDir })
  if (options.pool && !options.runtime) throw new Error('createBerth: `pool` needs a `runtime`')
  const runnerMount = options.runner?.bundleDir
    ? [{ type: 'bind' as const, source: resolve(options.runner.bundleDir), target: '/opt/berth-runner', readOnly: true }]
    : []
  const command = options.runner?.command ?? (options.runner?.bundleDir ? ['node', '/opt/berth-runner/main.js'] : ['berth-runner'])
  const caps = options.environments?.caps ?? DEFAULT_ENVIRONMENT_CAPS
  const runtime = options.runtime
  const agentUser = options.agentUser ?? '1000:1000'
  // The default environment's containers (the warm ones): its policy where the runtime
  // enforces it (an allowlist is made per task, as it names the task's model endpoint),
  // the default limits, the agent's user.
  const enforced = runtime?.capabilities.egress ?? []
  if (runtime && options.pool && caps.defaultPolicy !== 'allowlist' && !enforced.includes(caps.defaultPolicy)) {
    logger.warn(`the ${runtime.name} runtime cannot enforce the ${caps.defaultPolicy} network policy: tasks of the default environment keep the host's network (see docs/ENVIRONMENTS.md)`)
  }
  const defaultEnvSpec: Partial<ContainerSpec> = runtime?.capabilities.isolation
    ? {
        // A pool spec naming a network of its own (an embedding's choice) keeps it.
        ...(options.pool?.spec?.network === undefined && caps.defaultPolicy !== 'allowlist' && enforced.includes(caps.defaultPolicy) && { egress: { policy: caps.defaultPolicy } }),
        limits: { cpus: caps.defaults.cpus, memoryBytes: caps.defaults.memory_mb * 1024 * 1024, pids: caps.defaults.pids },
        ...(agentUser !== 'root' && { user: agentUser }),
      }
    : {}
  // The pool asks the tasks service which in-use containers a restart should keep.
  let accountFor: (c: PooledContainer) => Promise<boolean> = async () => false
  const pool =
    options.runtime && options.pool
      ? new ContainerPool({
          runtime: options.runtime,
          store,
          clock,
          logger,
          image: options.pool.image,
          min: options.pool.min ?? 0,
          max: options.pool.max ?? 20,
          name: options.pool.name ?? defaultPoolName(dataDir),
          ...(options.pool.imageRecipe && { imageRecipe: options.pool.imageRecipe }),
          ...(options.pool.retry && { retry: options.pool.retry }),
          spec: { ...defaultEnvSpec, ...options.pool.spec, mounts: [...(options.pool.spec?.mounts ?? []), ...runnerMount] },
          adopt: (c) => accountFor(c),
        })
      : undefined
  const warmAgents =
    pool && options.pool?.warmAgents
      ? new WarmAgents({ runtime: options.runtime!, pool, command, logger, max: options.pool.warmAgents, cwd: '/workspace' })
      : undefined
  const providerOpts = { clock, ...(options.notifications?.timeoutMs !== undefined && { timeoutMs: options.notifications.timeoutMs }) }
  const chatProvider = options.chatProvider && createChatProvider(options.chatProvider, providerOpts)
  const mailProvider = options.mailProvider && createMailProvider(options.mailProvider, providerOpts)
  const notifier = createNotifier({
    allowPrivateWebhooks: options.allowPrivateWebhooks ?? false,
    smtp: options.smtp,
    ...(options.notifications?.timeoutMs !== undefined && { timeoutMs: options.notifications.timeoutMs }),
    ...(options.notifications?.resolve && { resolve: options.notifications.resolve }),
    channels: { ...(chatProvider && { chatprovider: chatProvider.channel }), ...(mailProvider && { mailprovider: mailProvider.channel }) },
  })
  const rateLimiter =
    options.rateLimit && 'take' in options.rateLimit
      ? options.rateLimit
      : tokenBucket({ rpm: options.rateLimit?.rpm ?? 60, burst: options.rateLimit?.burst ?? 10, clock })
  const services = createServices({
    store,
    rateLimiter,
    notifier,
    ...(options.notifications && { notificationRetry: { attempts: options.notifications.attempts, backoffMs: options.notifications.backoffMs } }),
    ...(options.playbookWebhookRate && { playbookWebhookRate: options.playbookWebhookRate }),
    ...(pool && {
      pool,
      engine: {
        runtime: options.runtime!,
        pool,
        command,
        ...(warmAgents && { warmAgents }),
      },
    }),
    ...(options.concurrency !== undefined && { concurrency: options.concurrency }),
    environmentCaps: caps,
    ...(pool && runtime?.ensureImage && { environmentImages: environmentImages({ runtime, defaultRef: options.pool!.image, ...(options.environments?.recipe && { recipe: options.environments.recipe }) }) }),
    ...(options.sessionIdleMs !== undefined && { sessionIdleMs: options.sessionIdleMs }),
    ...(options.recoveryGraceMs !== undefined && { recoveryGraceMs: options.recoveryGraceMs }),
    ...(options.workspaceFiles && { workspaceFiles: options.workspaceFiles }),
    cipher: createAesGcmCipher(key),
    gitProviders: createGitProviders(options.gitProviders ?? {}, { clock }),
    connectProviders: { ...(chatProvider && { chatprovider: chatProvider.connect }), ...(mailProvider && { mailprovider: mailProvider.connect }) },
    chatSigningSecret: chatProvider?.signingSecret,
    bankApi: createBankApi(options.bankProvider),
    messenger: { api: createMessengerApi(options.messenger), publicUrl: options.messenger?.publicUrl },
    oauthStateKey: deriveOAuthStateKey(key),
    clock,
    logger,
    adminToken: options.adminToken,
    version: VERSION,
    ...(options.catalog && { catalog: options.catalog }),
  })
  accountFor = (c) => services.tasks.accountFor(c)
  // Pool first (adopt or remove what a previous run left), then the tasks it served.
  // Task recovery runs even when the engine is down, so no task stays in limbo.
  // Then the playbook runs whose task ended while nothing listened.
  const startServices = async () => {
    await services.tasks.start()
    await services.playbookRuns.recover()
    await services.messenger.recover()
    await services.notifications.recover()
  }
  const ready = (pool ? pool.start().then(() => undefined) : Promise.resolve()).then(
    () => startServices(),
    async (err: unknown) => {
      await startServices()
      throw err
    },
  )
  // Observed by whoever awaits `ready`; never an unhandled rejection.
  ready.catch((err) => logger.error('start-up failed', { error: String(err) }))
  const run = createPipeline({
    services,
    rateLimiter,
    // Request lines log the path; the webhook trigger's carries its secret.
    logger,
    authenticate: options.authenticate,
    bodyLimit: options.bodyLimit,
    uploadLimit: options.uploadLimit,
    validateResponses: options.validateResponses,
    // Writes string bodies straight to the socket with a content-length (h3's Node adapter
    // otherwise streams a standard Response out chunked): about half the per-request cost.
    responseClass: FastResponse as unknown as typeof Response,
  })

  const websocket = createWebSocket({ services, logger, rateLimiter, authenticate: options.authenticate, maxPayload: options.bodyLimit ?? 1024 * 1024 })
  const table: readonly AnyRoute[] = [...coreRoutes, ...serverRoutes]
  const app = new H3({
    // h3's own rejections (e.g. a malformed percent-encoded path) get Berth's error shape.
    onError: (error) => {
      const status = error.status
      if (status === 400) return errorResponse(new ApiError('VALIDATION_FAILED', `Malformed request: ${error.message}`))
      if (status === 404) return errorResponse(new ApiError('NOT_FOUND', 'Not found'))
      if (status === 405) return errorResponse(new ApiError('METHOD_NOT_ALLOWED', 'Method not allowed'))
      if (status === 413) return errorResponse(new ApiError('PAYLOAD_TOO_LARGE', 'Request body too large'))
      return errorResponse(error.cause ?? error, logger)
    },
  })

  for (const route of table) {
    app.on(route.method, route.path, (event: H3Event) => run(route, event.req, getRouterParams(event, { decode: true })))
    // HEAD wherever GET: the GET's status and headers, its body dropped unread.
    if (route.method === 'GET') app.on('HEAD', route.path, (event: H3Event) => headOf(run(route, event.req, getRouterParams(event, { decode: true }))))
  }
  if (options.console) mountConsole(app)
  const matchers = table.map((r) => ({ method: r.method, re: pathMatcher(r.path) }))
  app.all('/**', async (event: H3Event) => {
    const path = event.url.pathname
    // Every /v1 answer counts against a rate limit and says so, 404 and 405 included.
    let limits: Record<string, string> = {}
    if (path === '/v1' || path.startsWith('/v1/')) {
      try {
        limits = await run.limitHeaders(event.req)
      } catch (err) {
        return errorResponse(err, logger)
      }
    }
    const allowed = [...new Set(matchers.filter((m) => m.re.test(path)).map((m) => m.method))]
    if (allowed.length === 0) return errorResponse(new ApiError('NOT_FOUND', `No route for ${event.req.method} ${path.slice(0, 200)}`), undefined, limits)
    if (event.req.method === 'OPTIONS') return new Response(null, { status: 204, headers: { ...limits, allow: allowed.join(', ') } })
    return errorResponse(new ApiError('METHOD_NOT_ALLOWED', `${event.req.method} is not allowed on ${path.slice(0, 200)}`, { allow: allowed }), undefined, {
      ...limits,
      allow: allowed.join(', '),
    })
  })

  return {
    app,
    fetch: async (request) => app.fetch(request),
    handler: toNodeHandler(app),
    handleUpgrade: websocket.handleUpgrade,
    services,
    routes: table,
    store,
    storage,
    pool,
    warmAgents,
    ready,
    closeWebSockets: (opts) => websocket.closeAll(opts),
    async close(opts = {}) {
      await ready.catch(() => {})
      websocket.closeAll()
      await services.tasks.close()
      await services.notifications.close()
      await services.messenger.close()
      notifier.close()
      await pool?.close({ removeAll: opts.removeContainers ?? false })
      await storage.dispose()
      await store.close?.()
    },
  }
}
