/**
 * `@berth/server`: Berth on h3 and `node:http`, by group. `createBerth` and its options,
 * mounting in another framework, the stores, and the standalone server's configuration.
 */

// Berth
export { createBerth } from './berth.js'
export type { Berth, BerthOptions } from './berth-options.js'

// What `pnpm start` runs, for embedders: the runtime choice, settings, signals, the crash guard, migrate
export {
  chooseRuntime,
  engineAtUrl,
  localFor,
  NO_ISOLATION_WARNING,
  type ChooseRuntimeOptions,
  type ChosenRuntime,
  type RuntimeName,
} from './embedded/runtime-choice.js'
export { containerDefaults, DEFAULT_IMAGE, type ContainerSettings } from './embedded/container-defaults.js'
export { berthFromConfig, integrationsLine, type ConfiguredBerth } from './embedded/from-config.js'
export { loadSettings, type LoadedSettings } from './embedded/settings.js'
export { storageFor, redactUrl, type ChosenStorage } from './embedded/storage-choice.js'
export { openStoreUrl, type OpenedStore } from './embedded/store-url.js'
export { coordinationFor, instanceIdFor } from './embedded/coordination-choice.js'
export { onShutdown, type ShutdownOptions } from './embedded/shutdown.js'
export { guardUncaught, type GuardOptions } from './crash-guard.js'
export { migrateCommand } from './embedded/migrate-command.js'
export { pruneCommand } from './embedded/prune-command.js'
export { holdServerLease, serverHolding, SERVER_LEASE_FILE, SERVER_LEASE_MS } from './embedded/server-lease.js'
export type { SmtpOptions } from './notifiers/email.js'
export type { GitProviderConfig, GitProvidersConfig } from './git/providers.js'
export type { ChatProviderConfig } from './notifiers/chat-provider.js'
export type { MailProviderConfig } from './notifiers/mail-provider.js'

// Channels: add a delivery type (the port lives in @berth/core)
export { defineChannel, type Channel } from '@berth/core'

// Embedding (Express, Fastify, Connect)
export { berthMiddleware, type BerthMiddleware } from './middleware.js'

// Stores
export { memoryStore } from './storage/memory.js'
export { embeddedStore } from './storage/embedded.js'
export { sqliteStore, type ClosableStore, type SqliteStore } from './storage/sqlite.js'
export { redisStore, type RedisClient, type RedisStoreOptions } from './storage/redis.js'
export { postgresStore, type PostgresStore, type PostgresStoreOptions } from './storage/postgres.js'
export type { ImportRow } from './storage/postgres-import.js'
export { copyStore, type CopyOptions, type CopyReport, type KindCounts } from './storage/copy.js'
export { unstorageStore, type UnstorageStoreOptions } from './store.js'
export { atomicFsDriver } from './fs-storage.js'

// Configuration from the environment and a config file (the standalone server)
export { configFromEnv, type BerthConfig } from './config.js'
export {
  prometheusMetrics,
  serveMetrics,
  type MetricsListener,
  type PrometheusMetrics,
  type PrometheusMetricsOptions,
} from './metrics/index.js'
export { SETTINGS, withConfigFile, type ConfigFile } from './config-file.js'
export { integrationsFromEnv, type IntegrationsConfig } from './config-integrations.js'

// Coordination of several instances (queues, slots, rate buckets, single-use keys, pub/sub)
export {
  createCoordination,
  redisCoordination,
  type CoordinationOptions,
  type RedisCoordinationOptions,
} from './coordination/index.js'
