/** `createServices`: every service of a deployment, built in order over its ports. */
import { CONNECT_TYPES } from '@berth/contract'
import { DEFAULT_MODELS, staticCatalog } from './models.js'
import { systemClock, type Clock } from './ports/clock.js'
import { silentLogger, type Logger } from './ports/logger.js'
import { noopMetrics, type Metrics } from './ports/metrics.js'
import { memoryBlobs } from './ports/blob-store.js'
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
import { CallerCaps } from './limits/caller-caps.js'
import { EventBus } from './tasks/event-bus.js'
import { EventLog } from './workspaces/event-log.js'
import { MemoryService } from './resources/memory.js'
import { TasksService } from './tasks/service.js'
import { WorkspacesService } from './workspaces/workspaces.js'
import { WorkspaceFilesService } from './workspaces/workspace-files.js'
import { WorkspaceSnapshots } from './workspaces/workspace-snapshots.js'
import { noPool, type PoolView } from './runtime/pool-view.js'
import { Checkpoints } from './workspaces/checkpoints.js'
import { sessionOps, type SessionOps } from './workspaces/session-ops.js'
import { ProfilesService } from './resources/profiles.js'
import { DEFAULT_ENVIRONMENT_CAPS, EnvironmentsService } from './resources/index.js'
import { UsersService } from './resources/users.js'
import { tokenBucket, type RateLimiter } from './limits/rate-limit.js'
import { coordinatedLimiter } from './limits/coordinated.js'
import { createChannelRegistry, type ChannelRegistry } from './ports/channel.js'
import { DeliveryLog } from './integrations/deliveries.js'
import { IntegrationsService } from './integrations/integrations.js'
import { NotificationsService } from './integrations/notifications.js'
import { PlaybookRunsService } from './playbooks/playbook-runs.js'
import { PlaybooksService } from './playbooks/playbooks.js'
import { WebhookTrigger } from './playbooks/webhook-trigger.js'
import { PlaybookScheduler } from './playbooks/scheduler.js'
import { randomBytes } from 'node:crypto'
import { GitAccountsService } from './integrations/git-accounts.js'
import { OAuthStates } from './integrations/oauth-state.js'
import { ChatMailConnectService } from './integrations/chat-mail-connect.js'
import { ChatEventsService } from './integrations/chat-events.js'
import { unconfiguredBankApi } from './ports/bank-api.js'
import { BankProviderService } from './integrations/bank-provider.js'
import { unconfiguredMessengerApi } from './ports/messenger-api.js'
import { MessengerService } from './integrations/messenger-bot.js'
import { RunGrants } from './tasks/run-grants.js'
import { AuditLog } from './audit/log.js'
import { createUsage, type Usage } from './usage/index.js'
import { PreviewsService } from './previews/service.js'

import type { ServicesOptions } from './services-options.js'
import { ListCursors } from './records/cursor.js'
import { isolationLevels } from './runtime/isolation.js'

export type { ServicesOptions }

/** Every service a route handler can reach through `ctx.services`. */
export interface Services extends SessionOps {
  /** What a run's capability token is worth; present with a credential broker. */
  runGrants: RunGrants | undefined
  version: string
  clock: Clock
  logger: Logger
  metrics: Metrics
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
  pool: PoolView
  workspaces: WorkspacesService
  /** Browse, upload and download a workspace's files (in its container, or from its volume). */
  workspaceFiles: WorkspaceFilesService
  tasks: TasksService
  eventLog: EventLog
  bus: EventBus
  slots: ConcurrencySlots
  /** Per-caller caps on running workspaces and pool share (operator defaults, per-caller overrides). */
  callers: CallerCaps
  /** The per-caller rate limiter, when the server shares it (for the operator's view). */
  rateLimiter: RateLimiter | undefined
  /** The usage ledger (the model gateway records its calls in it) and the monthly spending limits. */
  usage: Usage
  /** What this instance shares with the others (`memory` when it runs alone). */
  coordination: Coordination
  /** Single-use keys; with a shared coordination also recorded in the store, so a flushed Redis reopens none. */
  once: OnceKeys
  /** Puts the coordination's state back from the store: started with the services, run on every backend reset. */
  rebuild: CoordinationRebuild
  playbooks: PlaybooksService
  playbookRuns: PlaybookRunsService
  /** Starts scheduled playbooks' runs, once per slot across instances: `start()` with the services, `close()` before them. */
  playbookScheduler: PlaybookScheduler
  webhookTrigger: WebhookTrigger
  integrations: IntegrationsService
  deliveries: DeliveryLog
  /** One channel per integration type: every delivery goes through it. */
  channels: ChannelRegistry
  notifications: NotificationsService
  /** Every finished session task's files and conversation, which a fork or a rewind starts from. */
  checkpoints: Checkpoints
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
  /** Preview links to ports inside session containers, and where a token leads. */
  previews: PreviewsService
  /** Berth's public URL for links it hands out (`BERTH_PUBLIC_URL`); unset, each request's origin. */
  publicUrl: string | undefined
  /** The audit log: who changed users, keys, credentials, secrets and more (`GET /admin/audit`, `GET /v1/audit`). */
  audit: AuditLog
  /** Seals and opens the lists' `cursor`s (keyset paging), with the deployment's cipher. */
  cursors: ListCursors
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
  const audit = new AuditLog({ store, clock, logger, coordination, retentionDays: opts.auditRetentionDays })
  const metrics = opts.metrics ?? noopMetrics
  const environments = new EnvironmentsService({
    store,
    clock,
    logger,
    caps: opts.environmentCaps ?? DEFAULT_ENVIRONMENT_CAPS,
    images: opts.environmentImages,
    isolations: opts.engine && isolationLevels(opts.engine.runtime),
  })
  const profiles = new ProfilesService(store, clock, apiKeys, cipher, environments, {
    ms: opts.profileCacheMs,
    pubsub: coordination.pubsub,
  })
  const memory = new MemoryService(store, clock)
  const secrets = createSecretsService(store, clock, cipher)
  const tools = createToolsService(store, clock, cipher)
  const skills = createSkillsService(store, clock)
  const agents = createAgentsService(store, clock, profiles)
  const workspaces = new WorkspacesService(store, clock)
  const eventLog = new EventLog(store, clock)
  const bus = new EventBus()
  // Counted over every instance of a shared coordination; this process alone counts in memory, exactly as before.
  const slots = new ConcurrencySlots(opts.concurrency ?? 5, opts.coordination && { slots: coordination.slots })
  const callers = new CallerCaps({
    store,
    clock,
    defaults: opts.callerCaps,
    poolMax: () => opts.engine?.pool.stats().max,
    slots: opts.coordination && coordination.slots,
  })
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
    audit,
  })
  const blobs = opts.workspaceFiles?.blobs ?? memoryBlobs()
  const snapshots = new WorkspaceSnapshots({ store, clock, logger, ...opts.workspaceFiles, blobs })
  const kept = { retentionMs: opts.workspaceFiles?.retentionMs, ...opts.checkpoints }
  const checkpoints = new Checkpoints({ store, blobs, clock, logger, engine: opts.engine, eventLog, ...kept })
  const catalog = { apiKeys, secrets, memory, tools, skills, agents, gitAccounts, cipher, broker: opts.broker }
  const usage = createUsage({ store, clock, logger, instanceId: coordination.instanceId })
  const runGrants = opts.broker
    ? new RunGrants({ store, tokens: opts.broker.tokens, catalog, profiles, environments, budgets: usage.budgets })
    : undefined
  const tasks = new TasksService({
    store,
    clock,
    logger,
    metrics,
    eventLog,
    bus,
    slots,
    callers,
    profiles,
    environments,
    workspaces,
    catalog,
    engine: opts.engine,
    snapshots,
    checkpoints,
    coordination,
    usage,
    once,
    sessionIdleMs: opts.sessionIdleMs,
    timeLimit: opts.taskTimeLimit,
    recoveryGraceMs: opts.recoveryGraceMs,
    audit,
  })
  const deliveries = new DeliveryLog(store)
  const integrations = new IntegrationsService(store, clock, cipher, channels, deliveries, audit)
  const notifications = new NotificationsService({
    store,
    clock,
    logger,
    bus,
    integrations,
    deliveries,
    notifier: channels,
    metrics,
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
  const { minIntervalS, maxPerCaller, ...scheduling } = opts.playbookSchedule ?? {}
  const playbooks = new PlaybooksService(store, clock, profiles, playbookRuns, { minIntervalS, maxPerCaller })
  const playbookScheduler = new PlaybookScheduler({
    store,
    clock,
    logger,
    coordination,
    once,
    playbooks,
    runs: playbookRuns,
    rateLimiter: opts.rateLimiter,
    ...scheduling,
  })
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
  const sessionDeps = { store, clock, logger, workspaces, tasks, engine: opts.engine, eventLog, snapshots, checkpoints }
  return {
    runGrants,
    version: opts.version ?? '0.0.0',
    clock,
    logger,
    metrics,
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
    callers,
    rateLimiter: opts.rateLimiter,
    usage,
    coordination,
    once,
    rebuild,
    playbooks,
    playbookRuns,
    playbookScheduler,
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
    audit,
    cursors: new ListCursors(cipher),
    previews: new PreviewsService({
      store,
      clock,
      workspaces,
      engine: opts.engine,
      coordination,
      ttl: opts.previews?.ttl,
      instanceUrl: opts.previews?.instanceUrl,
    }),
    publicUrl: opts.previews?.publicUrl,
    checkpoints,
    ...sessionOps(sessionDeps),
  }
}
