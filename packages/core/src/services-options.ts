/** `ServicesOptions`: what `createServices` builds a deployment's services from (the ports and the settings). */
import type { ConnectType } from '@berth/contract'
import type { ModelCatalog } from './models.js'
import type { Clock } from './ports/clock.js'
import type { Cipher } from './ports/cipher.js'
import type { BlobStore } from './ports/blob-store.js'
import type { Logger } from './ports/logger.js'
import type { Metrics } from './ports/metrics.js'
import type { Store } from './ports/store.js'
import type { Coordination } from './coordination/port.js'
import type { TaskEngine } from './tasks/engine.js'
import type { TasksOptions } from './tasks/service-options.js'
import type { ContainerPool } from './runtime/index.js'
import type { EnvironmentCaps, EnvironmentImages } from './resources/index.js'
import type { RateLimiter } from './limits/rate-limit.js'
import type { CallerCapSettings } from './limits/caller-caps.js'
import type { Notifier } from './ports/notifier.js'
import type { PreviewTtl } from './previews/service.js'
import type { Channel } from './ports/channel.js'
import type { GitProvider, GitProviderName } from './ports/git-provider.js'
import type { ConnectProvider } from './integrations/chat-mail-types.js'
import type { BankApi } from './ports/bank-api.js'
import type { MessengerApi } from './ports/messenger-api.js'
import type { BrokerPlan } from './tasks/materialize.js'
import type { SchedulerTimers } from './playbooks/scheduler.js'

/** What the services are built from: the ports and the deployment's settings. */
export interface ServicesOptions {
  store: Store
  cipher: Cipher
  clock?: Clock
  logger?: Logger
  /** Where the task path's observations go (default {@link noopMetrics}). */
  metrics?: Metrics
  catalog?: ModelCatalog
  /** Operator token (`BERTH_ADMIN_TOKEN`). */
  adminToken?: string | undefined
  /** Version reported by `GET /health`. */
  version?: string
  /** The warm container pool; without one, stats are zeros and no container exists. */
  pool?: ContainerPool
  /** How tasks get containers and start the runner; without it, submitting a task is a 502. */
  engine?: TaskEngine
  /** Running workspaces per profile (default 5). */
  concurrency?: number
  /** Per-caller caps: running workspaces and share of the pool, the operator's defaults (default none). */
  callerCaps?: Partial<CallerCapSettings> | undefined
  /** The per-caller limiter the server applies; read by `GET /admin/limits` only. */
  rateLimiter?: RateLimiter
  /** What instances share (queues, slots, rate buckets, single-use keys, pub/sub); default one process's memory. */
  coordination?: Coordination
  /** The operator's caps and defaults for environments (default {@link DEFAULT_ENVIRONMENT_CAPS}). */
  environmentCaps?: EnvironmentCaps
  /** How environment images are provisioned (without it, every environment uses the pool's image). */
  environmentImages?: EnvironmentImages
  /** A session's container is released after this long without a prompt (default 15 min). */
  sessionIdleMs?: number
  /** A task's wall time once running, in seconds: default and cap (default 1 h and 1 day). */
  taskTimeLimit?: TasksOptions['timeLimit']
  /** After a restart, how long to wait for a runner still at work (default 30 s). */
  recoveryGraceMs?: number
  /**
   * Files of released workspaces without a volume (batch tasks): kept this long (default 7
   * days; `null` until the workspace is deleted), up to `maxBytes` each (default 50 MiB) and
   * `quotaBytes` per caller (default 1 GiB, the oldest dropped first), as blobs in `blobs`
   * (default: this process's memory; `@berth/server` keeps files under its data dir).
   */
  workspaceFiles?: { retentionMs?: number | null; maxBytes?: number; quotaBytes?: number; blobs?: BlobStore }
  /**
   * Checkpoints of sessions (every finished task's files and conversation, in the same
   * `blobs`, within the same `retentionMs`): the newest `maxPerSession` per session (default
   * 50; 0: none), none of a workspace whose files pass `maxBytes` (default 1 GiB).
   */
  checkpoints?: { maxPerSession?: number; maxBytes?: number }
  /** Preview links: their lifetime (default 1 h, at most 1 day), Berth's public URL for the links (default: the request's origin) and this instance's URL for the others. */
  previews?: { ttl?: PreviewTtl; publicUrl?: string | undefined; instanceUrl?: string | undefined }
  /**
   * How each integration type delivers: `webhook`, `email`, and the transports of
   * `chatprovider` and `mailprovider` (core wraps them with fresh OAuth tokens). Core adds
   * `bankprovider` and `messenger` itself. A type without a channel fails its deliveries, untried.
   */
  channels?: Record<string, Channel>
  /** A whole notifier for the types without a channel (the form before `channels`). */
  notifier?: Notifier
  /** Notification retries: tries in all (default 5) and the first backoff (default 1 s, doubling). */
  notificationRetry?: { attempts?: number; backoffMs?: number }
  /**
   * Scheduled playbooks: how often each instance looks for due slots (default 1 s), how late
   * a slot may be and still run as on time (default 60 s), the timers ticking (tests), the
   * least time between two runs of a schedule a caller may save (default 60 s, at most a
   * day) and how many active schedules one caller may have (default 20; `null`: no cap).
   */
  playbookSchedule?: {
    tickMs?: number
    graceMs?: number
    timers?: SchedulerTimers
    minIntervalS?: number
    maxPerCaller?: number | null
  }
  /** Per-playbook limit of its webhook trigger (default `{ rpm: 60, burst: 10 }`). */
  playbookWebhookRate?: { rpm: number; burst: number }
  /**
   * The credential broker (model gateway, egress proxy): with it, tasks hold a capability
   * token instead of the model key, brokered secrets and Git tokens; `services.runGrants`
   * answers what a token is worth. Paths are where containers find the sockets.
   */
  broker?: BrokerPlan
  /** Git providers accounts can be connected from (their OAuth clients and user APIs). */
  gitProviders?: Partial<Record<GitProviderName, GitProvider>>
  /**
   * Key OAuth `state` values are signed with (32+ bytes; derive it from the encryption key
   * with `deriveOAuthStateKey`). Default: random per process, so flows in progress do not
   * survive a restart.
   */
  oauthStateKey?: Uint8Array
  /** The chat-workspace and mail providers integrations are connected to by OAuth. */
  connectProviders?: Partial<Record<ConnectType, ConnectProvider>>
  /** The chat provider app's signing secret: `POST /api/chatprovider/events` verifies requests with it. */
  chatSigningSecret?: string | undefined
  /** The banking-data provider's API (connect-widget enrollments are verified with it). */
  bankApi?: BankApi
  /** The messenger's Bot API, and where the provider reaches this server (default: the setup request's origin). */
  messenger?: { api: MessengerApi; publicUrl?: string | undefined }
  /** How long audit entries are kept, in days (default 365). */
  auditRetentionDays?: number | undefined
  /**
   * How long an instance answers `GET /v1/profiles/:id` from memory, in ms (default 1000;
   * 0: never). A change is seen at once on the instance that made it; the others are told
   * over the coordination's pub/sub, and this bounds what a lost message leaves stale.
   */
  profileCacheMs?: number | undefined
}
