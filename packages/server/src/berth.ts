/** `createBerth`: a Berth server assembled from its parts (storage, the container side, integrations, the HTTP app). */
import {
  createAesGcmCipher,
  createPipeline,
  createServices,
  RunTokens,
  jsonLogger,
  noopMetrics,
  readinessOf,
  routes as coreRoutes,
  systemClock,
  type AnyRoute,
} from '@berth/core'
import { toNodeHandler } from 'h3/node'
import { FastResponse } from 'srvx/node'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { join, resolve } from 'node:path'
import { fileBlobs } from './blob-files.js'
import type { Berth, BerthOptions } from './berth-options.js'
import { loadEncryptionKey } from './encryption-key.js'
import { serverRoutes } from './routes.js'
import { unstorageStore } from './store.js'
import { embeddedStore } from './storage/embedded.js'
import { storageView } from './storage/unstorage-view.js'
import { createWebSocket } from './websocket.js'
import { resolveRuntime } from './embedded/default-runtime.js'
import { createPreviewProxy } from './preview-proxy.js'
import { VERSION } from './version.js'
import { createApp } from './wiring/app.js'
import { rateLimiterFor } from './wiring/rate-limiter.js'
import { wireIntegrations } from './wiring/channels.js'
import { wirePool } from './wiring/pool.js'
import { brokerLayout, startBroker, type ModelCallObserver } from './broker/index.js'
import { countedStore, prometheusMetrics, watchCoordination } from './metrics/index.js'

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
export function createBerth(given: BerthOptions = {}): Berth {
  const dataDir = resolve(given.dataDir ?? './.data')
  const logger = given.logger ?? jsonLogger()
  // First: a runtime chosen here is closed by `close()`; a failing choice leaves nothing open.
  const { options, owned } = resolveRuntime(given, dataDir, logger)
  const clock = options.clock ?? systemClock
  const metrics = options.metrics === true ? prometheusMetrics() : options.metrics || noopMetrics
  const store = options.storage
    ? unstorageStore(options.storage, { cache: options.cacheReads ?? false })
    : (options.store ?? embeddedStore(dataDir, logger))
  const storage = options.storage ?? storageView(store)
  // Failed store calls are counted; berth.store stays the store as given.
  const counted = metrics === noopMetrics ? store : countedStore(store, metrics)
  const key = loadEncryptionKey({ configured: options.encryptionKey, dataDir })
  // The credential broker serves containers: on wherever tasks run in them, unless turned off.
  const brokerLayoutFor =
    options.broker !== false && options.runtime && options.pool
      ? brokerLayout({
          dataDir,
          dir: options.broker?.dir,
          isolated: options.runtime.capabilities.isolation,
        })
      : undefined
  const tokens = brokerLayoutFor && new RunTokens(key)
  const broker = brokerLayoutFor && tokens && { layout: brokerLayoutFor, tokens }
  const {
    pool,
    warmAgents,
    services: containerSide,
  } = wirePool(options, {
    store: counted,
    clock,
    logger,
    metrics,
    dataDir,
    broker: broker && { mounts: broker.layout.mounts, tokens: broker.tokens },
  })
  const rateLimiter = rateLimiterFor(options, clock)
  const services = createServices({
    store: counted,
    metrics,
    rateLimiter,
    coordination: options.coordination,
    ...containerSide,
    ...wireIntegrations(options, { clock, key }),
    playbookWebhookRate: options.playbookWebhookRate,
    playbookSchedule: options.playbookSchedule,
    concurrency: options.concurrency,
    callerCaps: options.callerCaps,
    sessionIdleMs: options.sessionIdleMs,
    taskTimeLimit: options.taskTimeLimit,
    recoveryGraceMs: options.recoveryGraceMs,
    workspaceFiles: {
      ...options.workspaceFiles,
      blobs: options.workspaceFiles?.blobs ?? fileBlobs(join(dataDir, 'snapshots')),
    },
    checkpoints: options.checkpoints,
    previews: options.previews,
    auditRetentionDays: options.auditRetentionDays,
    profileCacheMs: options.profileCacheMs,
    cipher: createAesGcmCipher(key),
    clock,
    logger,
    adminToken: options.adminToken,
    version: VERSION,
    catalog: options.catalog,
    broker: broker?.layout.plan(broker.tokens),
  })
  // Whoever counts model calls (metrics, traces, the usage ledger) adds its observer here.
  const modelCallObservers: ModelCallObserver[] = [
    // The ledger's write is awaited by the task's end (its result takes the metered figures)
    // and by the gateway's monthly limits (the call counts apart until the ledger has it).
    (grant, usage) => services.usage.ledger.recordCall(grant, usage).catch(() => {}),
  ]
  // Up before the pool and the tasks: a recovered task's runner may be asking it already.
  const brokerStarted =
    broker && services.runGrants
      ? startBroker(broker.layout, services.runGrants, {
          logger,
          bus: services.bus,
          metrics,
          upstreamCa: options.broker ? options.broker.upstreamCa : undefined,
          onUsage: modelCallObservers,
          onEgressRefused: (refusal) => services.audit.egressRefused(refusal),
        })
      : Promise.resolve(undefined)
  // Pool first (adopt or remove what a previous run left), then the tasks it served.
  // Task recovery runs even when the engine is down, so no task stays in limbo.
  // Then the playbook runs whose task ended while nothing listened.
  const startServices = async () => {
    services.audit.start()
    await services.previews.start()
    await services.tasks.start()
    await services.playbookRuns.recover()
    await services.messenger.recover()
    await services.notifications.recover()
    // Whatever the coordination backend lost while no instance ran, put back from the store.
    await services.rebuild.start({ reconcileMs: options.coordination ? options.reconcileMs : null })
    services.playbookScheduler.start()
  }
  const ready = brokerStarted
    .then(() => (pool ? pool.start().then(() => undefined) : undefined))
    .then(
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

  const websocket = createWebSocket({
    services,
    logger,
    rateLimiter,
    authenticate: options.authenticate,
    maxPayload: options.bodyLimit ?? 1024 * 1024,
  })
  const table: readonly AnyRoute[] = [...coreRoutes, ...serverRoutes]
  const app = createApp({ table, run, logger, metrics, console: options.console ?? false })
  const unwatch = watchCoordination(services.coordination, metrics)
  // `/preview/<token>/…` is served beside the app, on the Node server's requests and upgrades.
  const previews = createPreviewProxy({ services, logger })
  const nodeHandler = toNodeHandler(app)

  return {
    app,
    fetch: async (request) => app.fetch(request),
    // Previews are HTTP/1.1 (the proxy pipes raw sockets); an HTTP/2 request goes to the app.
    handler: (req, res) =>
      req.httpVersionMajor === 1 && previews.matches(req as IncomingMessage)
        ? previews.request(req as IncomingMessage, res as ServerResponse)
        : nodeHandler(req, res),
    handleUpgrade: async (req, socket, head) =>
      previews.matches(req) ? previews.upgrade(req, socket, head) : websocket.handleUpgrade(req, socket, head),
    services,
    metrics,
    routes: table,
    store,
    storage,
    pool,
    warmAgents,
    ready,
    closeWebSockets: (opts) => websocket.closeAll(opts),
    drain: () => readinessOf(services).drain(),
    async close(opts = {}) {
      readinessOf(services).drain()
      await ready.catch(() => {})
      unwatch()
      websocket.closeAll()
      services.rebuild.close()
      await services.playbookScheduler.close()
      // A runtime whose containers end with the server (`local`): sessions keep their
      // conversations for the next start, and no sandbox or mount is left behind.
      const ending = options.runtime?.capabilities.outlivesServer === false
      await services.tasks.close({ releaseSessions: ending })
      await services.notifications.close()
      await services.messenger.close()
      await services.audit.close()
      await services.profiles.close()
      services.channels.close()
      await pool?.close({ removeAll: opts.removeContainers ?? ending })
      await (await brokerStarted.catch(() => undefined))?.close()
      await storage.dispose()
      await store.close?.()
      await owned?.close?.()
    },
  }
}
