/** ports/: every interface core needs from outside — storage, time, encryption, logging, the container runtime, delivery channels, OAuth, Git hosts, banking and messenger APIs, and the one error their providers throw. */
export type { IndexEntry, IndexQuery, Store, StoredEntry } from './store.js'
export { manualClock, systemClock, type Clock } from './clock.js'
export { createAesGcmCipher, type Cipher } from './cipher.js'
export { jsonLogger, silentLogger, type Logger } from './logger.js'
export { noopMetrics, type Metrics, type ModelUsageObservation } from './metrics.js'
export type {
  ContainerRuntime,
  ContainerSpec,
  ExecOptions,
  ExecProcess,
  RuntimeCapabilities,
} from './container-runtime.js'
export type { DirectoryListing, FileEntry, FileWrite } from './container-files.js'
export { createChannelRegistry, defineChannel, type Channel, type ChannelRegistry } from './channel.js'
export type { DeliveryOutcome, Notifier, OutgoingNotification } from './notifier.js'
export type { OAuthClient, OAuthTokens } from './oauth-client.js'
export type { GitProvider, GitProviderName } from './git-provider.js'
export type { BankApi } from './bank-api.js'
export type { MessengerApi } from './messenger-api.js'
export { ProviderError, isProviderError } from './provider-error.js'
