/** The options of `createBerth` and the running server it returns. */
import type {
  AnyRoute,
  BlobStore,
  Authenticate,
  Clock,
  ContainerPool,
  ContainerRuntime,
  ContainerSpec,
  EnvironmentCaps,
  ImageRecipe,
  Logger,
  Metrics,
  ModelCatalog,
  PoolOptions,
  RateLimiter,
  Services,
  ServicesOptions,
  Store,
  WarmAgents,
} from '@berth/core'
import type { H3 } from 'h3'
import type { toNodeHandler } from 'h3/node'
import type { Storage } from 'unstorage'
import type { GitProvidersConfig } from './git/providers.js'
import type { Resolve } from './notifiers/address-policy.js'
import type { BankApiOptions } from './notifiers/bank-api.js'
import type { CallerCapSettings, Coordination, TimeLimitSettings } from '@berth/core'
import type { ChatProviderConfig } from './notifiers/chat-provider.js'
import type { SmtpOptions } from './notifiers/email.js'
import type { MailProviderConfig } from './notifiers/mail-provider.js'
import type { MessengerApiOptions } from './notifiers/messenger-api.js'
import type { createWebSocket } from './websocket.js'
import type { RuntimeName } from './embedded/runtime-choice.js'

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
  /**
   * What several instances share: queues, concurrency slots, rate buckets, single-use keys,
   * pub/sub (`createCoordination({ driver: 'redis', url })`). Default: this process's memory,
   * for one instance. The caller opens and closes it. Given one, the rate buckets (settings
   * from `rateLimit`) and notification retries live in it too (`GET /admin/limits` then lists
   * no callers: docs/COORDINATION.md "Shared state").
   */
  coordination?: Coordination
  /** JSON body limit in bytes (default 1 MiB). */
  bodyLimit?: number
  /** Upload limit in bytes: the whole multipart body of `POST /v1/workspaces/:id/files` (default 100 MiB); 413 beyond. */
  uploadLimit?: number
  /** Validate every response against its schema (on in tests; a mismatch is a 500). */
  validateResponses?: boolean
  clock?: Clock
  /** Structured logger. Default: JSON lines on stderr. */
  logger?: Logger
  /**
   * Metrics: `true` for Prometheus metrics in a registry of this server's own, served at
   * `GET /metrics` to the operator (admin) token; or a `Metrics` of yours (`prometheusMetrics()`
   * to add metrics to its registry). Default off: `GET /metrics` answers 404.
   */
  metrics?: boolean | Metrics
  catalog?: ModelCatalog
  /**
   * Where tasks run. Default `'auto'`, as `pnpm start` chooses: Docker if its socket (or
   * `DOCKER_HOST`) answers, else Podman, else `local` (bubblewrap where it works); with a
   * name (`'docker'`, `'podman'`, `'local'`), that one. A named runtime comes with what
   * `pnpm start` gives it, each replaced by an option you set: a pool (`berth-runner:latest`,
   * pulled or else built from this host's Node; min 0, max 20), the runner bundle of this
   * install, and images for environments with packages; `close()` releases it. A
   * `ContainerRuntime` of yours (`@berth/adapter-docker`, `-podman`, `-local`) comes with
   * nothing: no pool without `pool`. `false`: no runtime, the API only (tasks are refused).
   */
  runtime?: ContainerRuntime | RuntimeName | false
  /**
   * How the agent runner starts in a task container. Default: `['berth-runner']` (the
   * production image has it installed). With `bundleDir`, a self-contained runner directory
   * on the host (see `@berth/runner`) is mounted read-only at `/opt/berth-runner` and run
   * from there, so any image with Node 20 works.
   */
  runner?: { command?: string[]; bundleDir?: string }
  /**
   * The credential broker (on by default with a container runtime): a model gateway and an
   * egress proxy on unix sockets under `dir` (default `<dataDir>/broker`), mounted into
   * every container, so the model key, brokered secrets and Git tokens never enter it.
   * `false` turns it off (the key then reaches the container; for trusted prompts only).
   * `upstreamCa`: extra roots the proxy trusts towards upstream hosts (PEM). See docs/CREDENTIALS.md.
   */
  broker?: false | { dir?: string; upstreamCa?: string[] }
  /** Running workspaces per profile (`BERTH_CONCURRENCY`, default 5). */
  concurrency?: number
  /**
   * Per-caller caps, the operator's defaults (`BERTH_CALLER_MAX_RUNNING`, `BERTH_CALLER_POOL_SHARE`;
   * default none): workspaces holding a container at once, and the share of `pool.max`.
   */
  callerCaps?: Partial<CallerCapSettings>
  /** A session's container is released after this long without a prompt (default 15 min). */
  sessionIdleMs?: number
  /** A task's wall time once running, in seconds: the default and the most a submit may ask (default 1 h and 1 day; null: none). */
  taskTimeLimit?: TimeLimitSettings
  /** After a restart, how long to wait for a runner still at work to finish (default 30 s). */
  recoveryGraceMs?: number
  /**
   * Preview links (`/preview/<token>/…`, served by `handler` and `handleUpgrade`, not by `fetch`):
   * lifetime in seconds (default 1 h, at most 1 day), the public URL the links start with
   * (default: the request's origin), and this instance's URL for the others (several instances).
   */
  previews?: { ttl?: { defaultS: number; maxS: number }; publicUrl?: string; instanceUrl?: string }
  /**
   * With a coordination: how often its state is reconciled with the store (queued tasks no
   * queue holds, delivery retries no delayed job holds), default 30 s; null: never.
   */
  reconcileMs?: number | null
  /**
   * Files of a workspace without a volume (batch tasks) are copied out when its container
   * is released and stay readable for `retentionMs` (default 7 days; `null`: until the
   * workspace is deleted), up to `maxBytes` per workspace (default 50 MiB) and `quotaBytes`
   * per caller (default 1 GiB; the oldest are dropped to make room), as files under
   * `<dataDir>/snapshots` unless `blobs` says otherwise.
   */
  workspaceFiles?: { retentionMs?: number | null; maxBytes?: number; quotaBytes?: number; blobs?: BlobStore }
  /**
   * Checkpoints of sessions: every finished task's files and conversation, content-addressed
   * in the same `blobs` and kept within the same `retentionMs`. The newest `maxPerSession`
   * per session (default 50; 0: none are taken); a workspace whose files pass `maxBytes`
   * (default 1 GiB) is not checkpointed (`BERTH_CHECKPOINT_MAX_PER_SESSION`, `BERTH_CHECKPOINT_MAX_MB`).
   */
  checkpoints?: { maxPerSession?: number; maxBytes?: number }
  /** How long audit entries are kept, in days (default 365); older ones are swept hourly. */
  auditRetentionDays?: number
  /**
   * How long an instance answers `GET /v1/profiles/:id` from memory, in ms (default 1000;
   * 0: never). A change is seen at once on the instance that made it; the others are told
   * over the coordination's pub/sub, and this bounds what a lost message leaves stale.
   */
  profileCacheMs?: number
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
  /** Scheduled playbooks: tick interval, how late a slot still runs as on time, the timers (see `ServicesOptions`). */
  playbookSchedule?: ServicesOptions['playbookSchedule']
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
    /** Idle containers kept warm (default 0; `pnpm start` and a runtime chosen by `createBerth` derive it from the memory budget). */
    min?: number
    /** Containers at most (default 20). */
    max?: number
    /** Pool name, the `berth.pool` label: recovery touches only its own (default: `berth-` + a hash of the data dir). */
    name?: string
    /** Spec fields every container gets: limits, network, the runner mount. */
    spec?: Partial<ContainerSpec>
    /** The host's memory budget for containers in bytes (`BERTH_MEMORY_BUDGET_MB`): their memory caps sum to at most this (default none). */
    memoryBudgetBytes?: number | null
    /** Built when the image is missing and cannot be pulled (e.g. `hostImageRecipe()` from `@berth/adapter-docker`). */
    imageRecipe?: PoolOptions['imageRecipe']
    /** Backoff while the engine does not answer (default 1 s doubling to 30 s). */
    retry?: PoolOptions['retry']
    /**
     * Warm agents kept at most (default 0: off; `pnpm start` and a runtime chosen by
     * `createBerth` derive it from the memory budget): pooled containers whose runner already
     * started Claude Code for the settings of a recent task, so the next task like it skips
     * the agent's start-up. Each holds a container (counted in `max`) until used, evicted or
     * idle for `warmIdleMs`.
     */
    warmAgents?: number
    /** A parked agent no task took for this long gives its container back (default 10 min). */
    warmIdleMs?: number
  }
}

/** {@link BerthOptions} once the runtime is chosen: what the wiring reads. */
export type ResolvedBerthOptions = Omit<BerthOptions, 'runtime'> & { runtime?: ContainerRuntime | undefined }

/** A running Berth: mount `handler` in node:http/Express/Fastify, or call `fetch`. */
export interface Berth {
  /** The h3 app (for composing into another h3 app). */
  app: H3
  /** Web-standard handler: `Request` in, `Response` out. */
  fetch: (request: Request) => Promise<Response>
  /** Node `(req, res)` handler for node:http, Express 5 and Fastify 5; it also serves `/preview/<token>/…`. */
  handler: ReturnType<typeof toNodeHandler>
  /** The WebSocket (`/v1/ws`, and previews' upgrades): pass a Node server's `upgrade` event here (`server.on('upgrade', berth.handleUpgrade)`). */
  handleUpgrade: ReturnType<typeof createWebSocket>['handleUpgrade']
  services: Services
  /** The metrics in use (`services.metrics`); `exposition()` is the scrape when they are on. */
  metrics: Metrics
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
  /** Stop being ready: `GET /health/ready` answers 503 from now on (a shutdown calls it first, and `close` does). */
  drain(): void
  /**
   * Release storage and timers. Pooled containers stay for the next start to adopt, unless
   * `removeContainers`, or the runtime's containers do not outlive the server (`local`, see
   * `RuntimeCapabilities.outlivesServer`): then idle warm sessions are released first, their
   * conversations and files kept, and every container is removed.
   */
  close(opts?: { removeContainers?: boolean }): Promise<void>
}
