/**
 * `@berth/core`: the public surface, by group. Everything `@berth/contract` exports (errors,
 * ids, the route declarations, schemas, the WebSocket and runner protocols) is here too, so
 * a server imports one package; plus what a server is built from: the route table with its
 * handlers, ports, services, the container pool and the HTTP pipeline. Nothing under
 * `internal/` is exported (test/public-surface.test.ts pins this list).
 */

// The contract. Core's own `routes` and `defineRoute` below (routes with their handlers)
// take the place of the contract's declarations of the same names.
export * from '@berth/contract'
export type { Caller } from './caller.js'

// Routes with their handlers, and the document built from them
export {
  attachHandlers,
  defineHandlers,
  defineRoute,
  type AnyRoute,
  type Handler,
  type HandlerMap,
  type HandlerOf,
  type Handlers,
  type RouteContext,
  type RouteDef,
  type RouteResult,
} from './route.js'
export { routes } from './routes/index.js'
export { buildOpenApi, type OpenApiDocument, type OpenApiInfo, type OpenApiOptions } from './openapi/index.js'

// Ports: storage, time, secrets, logging
export type { IndexEntry, IndexQuery, Store, StoredEntry } from './ports/store.js'
export { manualClock, systemClock, type Clock } from './ports/clock.js'
export { createAesGcmCipher, type Cipher } from './ports/cipher.js'
export { jsonLogger, silentLogger, type Logger } from './ports/logger.js'
export { noopMetrics, type IdleSessionsStats, type Metrics, type ModelUsageObservation } from './ports/metrics.js'
export { memoryBlobs, type BlobStore } from './ports/blob-store.js'

// Ports: container runtime, and what every adapter shares (bytes, errors, one exec lifecycle, file operations)
export {
  IDLE_COMMAND,
  MANAGED_LABEL,
  RECIPE_LABEL,
  type ByteSource,
  type ContainerInfo,
  type ContainerMount,
  type ContainerRuntime,
  type ContainerSpec,
  type ContainerState,
  type ContainerStats,
  type ContainerSummary,
  type DirectoryListing,
  type EgressPolicy,
  type EnsureImageOptions,
  type ExecOptions,
  type ExecProcess,
  type ExecResult,
  type FileEntry,
  type FileWrite,
  type ImageRecipe,
  type ImageReport,
  type ListFilter,
  type PortTarget,
  type PrunedNetwork,
  type ResourceLimits,
  type RuntimeCapabilities,
  type StdinSource,
  type VolumeSummary,
} from './ports/container-runtime.js'
export { byteChannel, collectExec, toByteChunks, toWebStream, type ByteChannel } from './runtime/bytes.js'
export {
  ContainerError,
  FilePathError,
  isContainerError,
  isFilePathError,
  type ContainerFailure,
  type FilePathProblem,
} from './runtime/errors.js'
export { defineRuntime } from './runtime/define.js'
export {
  DISK_LABEL,
  isDiskName,
  releaseDisk,
  releaseUnusedDisk,
  tidyOldDisks,
  workspaceDisks,
  type Disk,
  type DiskOptions,
  type WorkspaceDisks,
} from './runtime/disks.js'
export { sweepOrphanDisks, type DiskSweepOptions } from './runtime/disk-sweep.js'
export { pruneDeployment, type PruneItem, type PruneOptions, type PruneReport } from './runtime/prune.js'
export {
  abortedExec,
  execLifecycle,
  type ExecHooks,
  type ExecLifecycle,
  type ExecOutcome,
  type StdinSink,
} from './runtime/exec.js'
export {
  MAX_ENTRIES,
  execFileOperations,
  relativePath,
  type FileOperations,
  type FileOperationsBase,
} from './runtime/files.js'

// Ports: outside services (notifications, OAuth, Git hosts, banking, messenger)
export type { DeliveryOutcome, NotificationTarget, Notifier, OutgoingNotification } from './ports/notifier.js'
export {
  createChannelRegistry,
  defineChannel,
  withoutIntegration,
  type Channel,
  type ChannelIntegration,
  type ChannelRegistry,
} from './ports/channel.js'
export {
  ProviderError,
  isProviderError,
  type ProviderErrorDetail,
  type ProviderErrorKinds,
  type ProviderApi,
} from './ports/provider-error.js'
export type { OAuthClient, OAuthErrorKind, OAuthTokens } from './ports/oauth-client.js'
export { GIT_PROVIDERS, type GitIdentity, type GitProvider, type GitProviderName } from './ports/git-provider.js'
export type { BankAccount, BankApi, BankApiErrorKind } from './ports/bank-api.js'
export type {
  MessengerApi,
  MessengerApiErrorKind,
  MessengerBotUser,
  MessengerChat,
  MessengerMessage,
  MessengerUpdate,
} from './ports/messenger-api.js'

// Services (everything behind the route table, wired once)
export { createServices, type Services, type ServicesOptions } from './services.js'
export type { ModelCatalog } from './models.js'

// Records
export { indexEntryFor } from './records/indexes.js'

// Resources
export {
  DEFAULT_ENVIRONMENT_CAPS,
  diskLimits,
  type EnvironmentCaps,
  type EnvironmentImages,
} from './resources/index.js'

// Tasks
export type { TaskRecord } from './tasks/task.js'
export { EventBus, type TaskBusMessage } from './tasks/event-bus.js'
export { WarmAgents, type WarmAgentsOptions } from './tasks/warm-agents.js'
export { DEFAULT_TIME_LIMIT, type TimeLimitSettings } from './tasks/time-limit.js'
export { RunTokens } from './tasks/run-tokens.js'
export {
  RunGrants,
  type AnthropicUpstream,
  type BedrockUpstream,
  type GatewayGrant,
  type GatewayUpstream,
  type ProxyGrant,
  type VertexUpstream,
} from './tasks/run-grants.js'
export type { EgressRefusal } from './audit/refusals.js'
export type { BudgetExceeded, Budgets, MonthlyLimit, ModelCallUsage, Usage, UsageLedger } from './usage/index.js'
export type { BrokerPlan } from './tasks/materialize.js'
export { brokeredPlaceholder } from './resources/catalog.js'

// Playbooks
export { DEFAULT_SCHEDULE_LIMITS, MAX_SCHEDULE_MIN_INTERVAL_S, type ScheduleLimits } from './playbooks/index.js'

// Workspaces
export { EventLog, type EventLogOptions, type NewEvent } from './workspaces/event-log.js'
export { adoptRunningWorkspaces } from './workspaces/adopt.js'
export type { PreviewRoute, PreviewsService, PreviewTtl } from './previews/service.js'

// Runtime (the warm container pool)
export { ContainerPool, defaultPoolName, type Lease, type PoolOptions, type PooledContainer } from './runtime/index.js'

// Integrations
export { deriveOAuthStateKey } from './integrations/oauth-state.js'
export type { ConnectProvider } from './integrations/chat-mail-types.js'

// Limits and network ranges
export { tokenBucket, type RateLimiter, type TokenBucketOptions } from './limits/rate-limit.js'
export { coordinatedLimiter } from './limits/coordinated.js'
export { CallerCaps, type CallerCapSettings, type CallerCapOverride } from './limits/caller-caps.js'
export { InstanceReadiness, readinessOf, type InstanceReadinessOptions } from './readiness.js'
export { PRIVATE_IPV4_RANGES, PRIVATE_IPV6_RANGES, privateCidrs, touchesPrivateRange } from './net/private-ranges.js'

// Transport (HTTP pipeline, WebSocket session)
export {
  createAuthenticate,
  createPipeline,
  errorResponse,
  type Authenticate,
  type Pipeline,
  type PipelineOptions,
} from './transport/index.js'
export { createTaskSocket, type TaskSocketOptions } from './transport/index.js'

// Tracing (OpenTelemetry API: spans cost nothing until an SDK is registered)
export { activeTraceId, traceContext, traceparentOf, tracer } from './tracing.js'

// Coordination of several instances (the port, its memory driver, and what drivers share)
export type {
  Coordination,
  DelayedJobs,
  DueJob,
  Instances,
  JobPriority,
  JobQueue,
  NewJob,
  OnceKeys,
  PubSub,
  QueueCounts,
  RateBuckets,
  RateSettings,
  SlotLease,
  Slots,
  TakenJob,
  CoordinationState,
  CoordinationChange,
} from './coordination/port.js'
export { CoordinationUnavailableError } from './coordination/port.js'
export { memoryCoordination, type MemoryCoordinationOptions } from './coordination/memory.js'
export { memoryHub, type MemoryHub, type MemoryHubOptions } from './coordination/memory-hub.js'
export { checkRateSettings, rateDecision } from './coordination/rate.js'
export { checkQueueName, queueRank } from './coordination/order.js'
