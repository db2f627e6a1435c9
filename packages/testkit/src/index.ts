/**
 * `@berth/testkit`: shared suites and fixtures for Berth's tests and for anyone writing a
 * runtime or a store. The offline model and the fake providers have their own entries
 * (`@berth/testkit/model`, `@berth/testkit/providers`).
 */

// Conformance suites (a runtime, a store) and the store suite's crash-test writer
export { runtimeConformanceSuite } from './conformance/index.js'
export type { ConformanceOptions } from './conformance/suite.js'
export { diskLimitSuite, type DiskLimitOptions } from './disk-limits.js'
export { storeConformanceSuite, type StoreUnderTest } from './store-conformance.js'
export {
  channelConformanceSuite,
  type ChannelConformanceOptions,
  type ChannelPeer,
  type ChannelSetup,
  type PeerAddress,
} from './channel-conformance.js'
export { runStoreWriter } from './store-writer.js'

// Container engines (Docker, Podman) provisioned for tests, and a small image recipe
export { ensureEngines, readEngine, findRepoRoot, ENSURE_SCRIPT, type EngineInfo } from './engines.js'
export { busyboxRecipe } from './image-recipe.js'

// Tar archives (the runtime port's archive format)
export { packTar, readTar, type TarInput, type TarEntry } from './tar.js'

// A local redis-server
export { startRedis, connectRedis, type LocalRedis } from './redis.js'
// A local PostgreSQL cluster
export { startPostgres, type LocalPostgres, type StartPostgresOptions } from './postgres.js'
// A local Prometheus (Debian's package) and promtool
export {
  promtool,
  prometheusBinDir,
  startPrometheus,
  type LocalPrometheus,
  type PromSample,
  type PrometheusOptions,
} from './prometheus.js'
export { coordinationConformanceSuite, type CoordinationUnderTest } from './coordination-conformance.js'

// An OTLP/HTTP (JSON) trace receiver on loopback
export { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp.js'

// Waiting for a condition outside vitest's `vi.waitFor` (the soak, the benchmarks, the suites above)
export { waitUntil, type WaitUntilOptions } from './wait.js'
