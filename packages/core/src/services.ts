/** `createServices`: every service of a deployment, built in order over its ports. */
import { notFound, type EngineHealth, type PoolStats, CONNECT_TYPES, type ConnectType } from '@berth/contract'
import { DEFAULT_MODELS, staticCatalog, type ModelCatalog } from './models.js'
import { systemClock, type Clock } from './ports/clock.js'
import type { Cipher } from './ports/cipher.js'
import { silentLogger, type Logger } from './ports/logger.js'
import type { Store } from './ports/store.js'
import { memoryCoordination } from './coordination/memory.js'
import type { Coordination, OnceKeys } from './coordination/port.js'
import { durableOnce } from './coordination/durable-once.js'
import { CoordinationRebuild } from './coordination/rebuild.js'
import { ApiKeysService } from './resources/api-keys.js'
import {
  createAgentsService,
  createSecretsService,
  createSkillsService,
  createToolsService,
  type AgentsService,
  type SecretsService,
  type SkillsService,
  type ToolsService,
} from './resources/catalog.js'
import { ConcurrencySlots } from './limits/concurrency.js'
import { EventBus } from './tasks/event-bus.js'
import { EventLog } from './workspaces/event-log.js'
import { MemoryService } from './resources/memory.js'
import type { TaskEngine } from './tasks/engine.js'
import { TasksService } from './tasks/service.js'
import { WorkspacesService } from './workspaces/workspaces.js'
import { WorkspaceFilesService } from './workspaces/workspace-files.js'
import { WorkspaceSnapshots } from './workspaces/workspace-snapshots.js'
import { deleteWorkspace } from './workspaces/delete.js'
import type { ContainerPool, PooledContainer } from './runtime/index.js'
import { ProfilesService } from './resources/profiles.js'
import {
  DEFAULT_ENVIRONMENT_CAPS,
  EnvironmentsService,
  type EnvironmentCaps,
  type EnvironmentImages,
} from './resources/index.js'
import { UsersService } from './resources/users.js'
import { tokenBucket, type RateLimiter } from './limits/rate-limit.js'
import { coordinatedLimiter } from './limits/coordinated.js'
import type { Notifier } from './ports/notifier.js'
import { createChannelRegistry, type Channel, type ChannelRegistry } from './ports/channel.js'
import { DeliveryLog } from './integrations/deliveries.js'
import { IntegrationsService } from './integrations/integrations.js'
import { NotificationsService } from './integrations/notifications.js'
import { PlaybookRunsService } from './playbooks/playbook-runs.js'
import { PlaybooksService } from './playbooks/playbooks.js'
import { WebhookTrigger } from './playbooks/webhook-trigger.js'
import { randomBytes } from 'node:crypto'
import type { GitProvider, GitProviderName } from './ports/git-provider.js'
import { GitAccountsService } from './integrations/git-accounts.js'
import { OAuthStates } from './integrations/oauth-state.js'
import { ChatMailConnectService } from './integrations/chat-mail-connect.js'
import type { ConnectProvider } from './integrations/chat-mail-types.js'
import { ChatEventsService } from './integrations/chat-events.js'
import { unconfiguredBankApi, type BankApi } from './ports/bank-api.js'
import { BankProviderService } from './integrations/bank-provider.js'
import { unconfiguredMessengerApi, type MessengerApi } from './ports/messenger-api.js'
import { MessengerService } from './integrations/messenger-bot.js'
import type { BrokerPlan } from './tasks/materialize.js'
import { RunGrants } from './tasks/run-grants.js'

/** What the services are built from: the ports and the deployment's settings. */
export interface ServicesOptions {
  store: Store
  cipher: Cipher
  clock?: Clock
  logger?: Logger
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
  /** After a restart, how long to wait for a runner still at work (default 30 s). */
  recoveryGraceMs?: number
  /**
   * Files of released workspaces without a volume (batch tasks): kept this long (default 7
   * days; `null` until the workspace is deleted), up to `maxBytes` each (default 50 MiB).
   */
  workspaceFiles?: { retentionMs?: number | null; maxBytes?: number }
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
}

/** Every service a route handler can reach through `ctx.services`. */
export interface Services {
  /** What a run's capability token is worth; present with a credential broker. */
  runGrants: RunGrants | undefined
  version: string
  clock: Clock
  logger: Logger
  users: UsersService
  apiKeys: ApiKeysService
  profiles: ProfilesService
  /** Environments: image, network policy, limits and variables of a profile's containers. */
  environments: EnvironmentsService
  memory: MemoryService
  secrets: SecretsService
  tools: ToolsService
  skills: SkillsService
  agents: AgentsService
  /** The warm pool; `engineStatus()` is `null` without a container runtime. */
  pool: Pick<ContainerPool, 'stats' | 'list' | 'forceRemove'> & { engineStatus(): EngineHealth | null }
  workspaces: WorkspacesService
  /** Browse, upload and download a workspace's files (in its container, or from its volume). */
  workspaceFiles: WorkspaceFilesService
  tasks: TasksService
  eventLog: EventLog
  bus: EventBus
  slots: ConcurrencySlots
  /** The per-caller rate limiter, when the server shares it (for the operator's view). */
  rateLimiter: RateLimiter | undefined
  /** What this instance shares with the others (`memory` when it runs alone). */
  coordination: Coordination
  /** Single-use keys; with a shared coordination also recorded in the store, so a flushed Redis reopens none. */
  once: OnceKeys
  /** Puts the coordination's state back from the store: started with the services, run on every backend reset. */
  rebuild: CoordinationRebuild
  playbooks: PlaybooksService
  playbookRuns: PlaybookRunsService
  webhookTrigger: WebhookTrigger
  integrations: IntegrationsService
  deliveries: DeliveryLog
  /** One channel per integration type: every delivery goes through it. */
  channels: ChannelRegistry
  notifications: NotificationsService
  /** Delete a workspace for good: stop its tasks, reap its container and volume, drop its log and row. */
  deleteWorkspace(owner: string, id: string): Promise<void>
  /** Signed, expiring, single-use OAuth `state` values (shared by every OAuth flow). */
  oauthStates: OAuthStates
  gitAccounts: GitAccountsService
  /** The OAuth-connected chat and mail integrations: authorize, callback, fresh tokens. */
  chatMail: ChatMailConnectService
  /** Signature-verified chat provider events, recorded per integration. */
  chatEvents: ChatEventsService
  /** The banking-data provider: connect-widget settings and enrollments. */
  bankProvider: BankProviderService
  /** The messenger bot: setup, claim, webhook, threads. */
  messenger: MessengerService
}

/** The pool surface when no container runtime is configured. */
const noPool: Services['pool'] = {
  stats: (): PoolStats => ({ min: 0, max: 0, in_use: 0, idle: 0 }),
  list: (): PooledContainer[] => [],
  engineStatus: () => null,
  forceRemove: async (id: string) => {
    throw notFound('container', id)
  },
}

/**
 * Build the services over the given ports.
 *
 * @example
 * ```ts
 * const services = createServices({ store, cipher: createAesGcmCipher(key) })
 * await services.profiles.list('usr_1', { page: 1, limit: 20 })
 * ```
 */
export function createServices(opts: ServicesOptions): Services {
  const clock = opts.clock ?? systemClock
  const { store, cipher } = opts
  const coordination = opts.coordination ?? memoryCoordination({ clock })
  const once = durableOnce(coordination.once, opts.coordination ? store : null, clock)
  // Every delivery goes through it; the services with a channel of their own register it below.
  const channels = createChannelRegistry(opts.channels, opts.notifier)
  // A model credential's base_url follows the webhooks' address policy.
  const checkUrl = (url: string) => channels.check('webhook', { url })
  const apiKeys = new ApiKeysService(store, cipher, clock, opts.catalog ?? staticCatalog(DEFAULT_MODELS), checkUrl)
  const logger = opts.logger ?? silentLogger
  const environments = new EnvironmentsService({
    store,
    clock,
    logger,
    caps: opts.environmentCaps ?? DEFAULT_ENVIRONMENT_CAPS,
    images: opts.environmentImages,
  })
  const profiles = new ProfilesService(store, clock, apiKeys, cipher, environments)
  const memory = new MemoryService(store, clock)
  const secrets = createSecretsService(store, clock, cipher)
  const tools = createToolsService(store, clock, cipher)
  const skills = createSkillsService(store, clock)
  const agents = createAgentsService(store, clock)
  const workspaces = new WorkspacesService(store, clock)
  const eventLog = new EventLog(store, clock)
  const bus = new EventBus()
  // Counted over every instance of a shared coordination; this process alone counts in memory, exactly as before.
  const slots = new ConcurrencySlots(opts.concurrency ?? 5, opts.coordination && { slots: coordination.slots })
  const oauthStates = new OAuthStates(
    store,
    clock,
    cipher,
    opts.oauthStateKey ?? new Uint8Array(randomBytes(32)),
    undefined,
    once,
  )
  const gitAccounts = new GitAccountsService({
    store,
    clock,
    cipher,
    logger,
    states: oauthStates,
    providers: opts.gitProviders ?? {},
  })
  const snapshots = new WorkspaceSnapshots({ store, clock, logger, ...opts.workspaceFiles })
  const catalog = { apiKeys, secrets, memory, tools, skills, agents, gitAccounts, cipher, broker: opts.broker }
  const runGrants = opts.broker
    ? new RunGrants({ store, tokens: opts.broker.tokens, catalog, profiles, environments })
    : undefined
  const tasks = new TasksService({
    store,
    clock,
    logger,
    eventLog,
    bus,
    slots,
    profiles,
    environments,
    workspaces,
    catalog,
    engine: opts.engine,
    snapshots,
    coordination,
    once,
    sessionIdleMs: opts.sessionIdleMs,
    recoveryGraceMs: opts.recoveryGraceMs,
  })
  const deliveries = new DeliveryLog(store)
  const integrations = new IntegrationsService(store, clock, cipher, channels, deliveries)
  const notifications = new NotificationsService({
    store,
    clock,
    logger,
    bus,
    integrations,
    deliveries,
    notifier: channels,
    ...opts.notificationRetry,
    sharedBy: opts.coordination,
    once,
  })
  const playbookRuns = new PlaybookRunsService({
    store,
    clock,
    logger,
    bus,
    tasks,
    notifications,
    once,
    startGraceMs: opts.coordination ? 60_000 : undefined,
  })
  const playbooks = new PlaybooksService(store, clock, profiles, playbookRuns)
  // Messenger and banking deliveries need core's own records (a run's task, a chat's
  // threads, the provider's token check); chat and mail get fresh OAuth tokens around the
  // deployment's transport.
  const bankProvider = new BankProviderService({
    store,
    clock,
    cipher,
    api: opts.bankApi ?? unconfiguredBankApi,
    integrations,
  })
  channels.register('bankprovider', bankProvider.channel)
  const messenger = new MessengerService({
    store,
    clock,
    cipher,
    logger,
    api: opts.messenger?.api ?? unconfiguredMessengerApi,
    publicUrl: opts.messenger?.publicUrl,
    bus,
    tasks,
    workspaces,
    playbooks,
    integrations,
    once,
  })
  channels.register('messenger', messenger.channel)
  integrations.onRemove((r) => (r.type === 'messenger' ? messenger.disconnected(r) : Promise.resolve()))
  const chatMail = new ChatMailConnectService({
    store,
    clock,
    cipher,
    logger,
    states: oauthStates,
    integrations,
    providers: opts.connectProviders ?? {},
  })
  for (const type of CONNECT_TYPES) channels.wrap(type, (transport) => chatMail.tokens.channel(type, transport))
  const chatEvents = new ChatEventsService({
    store,
    clock,
    logger,
    integrations,
    connect: chatMail,
    signingSecret: opts.chatSigningSecret,
  })
  // A coordination handed in is shared by instances: limits and retries go through it too.
  const webhookRate = opts.playbookWebhookRate ?? { rpm: 60, burst: 10 }
  const limiter = opts.coordination
    ? coordinatedLimiter(opts.coordination, webhookRate, 'playbook-webhook')
    : tokenBucket({ ...webhookRate, clock })
  const webhookTrigger = new WebhookTrigger({ playbooks, runs: playbookRuns, limiter })
  const parts = { tasks: tasks.rebuilder, notifications, once }
  const rebuild = new CoordinationRebuild({ coordination, logger, parts })
  return {
    runGrants,
    version: opts.version ?? '0.0.0',
    clock,
    logger,
    users: new UsersService({ store, clock, adminToken: opts.adminToken }),
    apiKeys,
    profiles,
    environments,
    memory,
    secrets,
    tools,
    skills,
    agents,
    pool: opts.pool ?? noPool,
    workspaces,
    workspaceFiles: new WorkspaceFilesService({ workspaces, engine: opts.engine, logger, snapshots }),
    tasks,
    eventLog,
    bus,
    slots,
    rateLimiter: opts.rateLimiter,
    coordination,
    once,
    rebuild,
    playbooks,
    playbookRuns,
    webhookTrigger,
    integrations,
    deliveries,
    channels,
    notifications,
    oauthStates,
    gitAccounts,
    bankProvider,
    messenger,
    chatMail,
    chatEvents,
    deleteWorkspace: (owner, id) =>
      deleteWorkspace({ store, logger, workspaces, tasks, engine: opts.engine, eventLog, snapshots }, owner, id),
  }
}
