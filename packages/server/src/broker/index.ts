/**
 * The credential broker beside the server: the model gateway and the egress proxy on unix
 * sockets in a directory that every container mounts read-only at `/run/berth` (with the
 * deployment CA's certificate; the CA's key stays outside it). What a request may do is
 * asked of core's `RunGrants` with the run's capability token. See docs/CREDENTIALS.md.
 */
import { copyFileSync, mkdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import {
  isEndedStatus,
  type BrokerPlan,
  type ContainerMount,
  type EventBus,
  type GatewayGrant,
  type Logger,
  type Metrics,
  type ModelUsageObservation,
  type RunGrants,
  type RunTokens,
} from '@berth/core'
import { loadOrCreateBrokerCa } from './broker-ca.js'
import { type EgressProxyOptions, startEgressProxy } from './egress-proxy.js'
import { startModelGateway, type ModelCallTiming, type ModelGateway, type ModelUsage } from './model-gateway.js'

/** A metered answer as the metrics see it, by the credential's provider (the stub model never reaches the gateway). */
const meteredUsage = (grant: GatewayGrant, usage: ModelUsage): ModelUsageObservation => ({
  provider: grant.upstream.provider ?? 'anthropic',
  model: usage.model,
  input_tokens: usage.input_tokens,
  output_tokens: usage.output_tokens,
  cache_read_tokens: usage.cache_read_input_tokens,
  cache_write_tokens: usage.cache_creation_input_tokens,
  cost_usd: usage.cost_usd,
})

/** Where containers find the broker. */
export const BROKER_MOUNT = '/run/berth'

/** The directory layout of a broker: `public/` is what containers mount. */
export interface BrokerLayout {
  dir: string
  publicDir: string
  /** The plan core's materialize uses (paths as the container sees them). */
  plan(tokens: RunTokens): BrokerPlan
  /** The mount every container gets (none for a runtime without isolation: it sees host paths). */
  mounts: ContainerMount[]
}

/**
 * Where the broker lives for a data dir: `<dataDir>/broker` (or `dir`), the sockets and the
 * CA certificate in its `public/`, which isolated containers mount at {@link BROKER_MOUNT}
 * and an unisolated runtime reads at its host path.
 *
 * @example
 * ```ts
 * const layout = brokerLayout({ dataDir: './.data', isolated: true })
 * layout.mounts[0].target // '/run/berth'
 * ```
 */
export function brokerLayout(opts: { dataDir: string; dir?: string | undefined; isolated: boolean }): BrokerLayout {
  const dir = resolve(opts.dir ?? join(opts.dataDir, 'broker'))
  const publicDir = join(dir, 'public')
  const seen = opts.isolated ? BROKER_MOUNT : publicDir
  return {
    dir,
    publicDir,
    plan: (tokens) => ({
      tokens,
      gateway_socket: `${seen}/gateway.sock`,
      proxy_socket: `${seen}/proxy.sock`,
      ca_file: `${seen}/ca.pem`,
    }),
    mounts: opts.isolated ? [{ type: 'bind', source: publicDir, target: BROKER_MOUNT, readOnly: true }] : [],
  }
}

/**
 * Told of every metered model call the gateway answered, with the grant it ran under
 * (task, caller's credential) and what it cost. Metrics, traces and the usage ledger
 * subscribe; each observer is called in turn and one that throws is logged, not fatal.
 * A promise an observer returns (the ledger's write) is awaited before the call stops
 * counting apart against monthly limits; anything else it returns is ignored.
 */
export type ModelCallObserver = (grant: GatewayGrant, usage: ModelUsage, timing: ModelCallTiming) => unknown

/** A running broker. */
export interface Broker {
  gateway: ModelGateway
  close(): Promise<void>
}

/**
 * Start the gateway and the proxy of `layout`, answering with `grants`.
 *
 * @example
 * ```ts
 * const broker = await startBroker(layout, services.runGrants, {
 *   logger,
 *   bus: services.bus,
 *   onUsage: [(grant, usage) => console.log(grant.task_id, usage.model, usage.cost_usd)],
 * })
 * ```
 */
export async function startBroker(
  layout: BrokerLayout,
  grants: RunGrants,
  opts: {
    logger: Logger
    bus: EventBus
    upstreamCa?: string[] | undefined
    /** Told of each metered model call, in this order. */
    onUsage?: readonly ModelCallObserver[]
    /** Model tokens and cost by provider and model. */
    metrics?: Metrics
    /** Told of every request the egress proxy refused (the audit log counts them). */
    onEgressRefused?: EgressProxyOptions['onRefused']
  },
): Promise<Broker> {
  const observers = opts.onUsage ?? []
  mkdirSync(layout.publicDir, { recursive: true, mode: 0o755 })
  // The CA's key stays in the broker's own directory; only its certificate is published.
  const ca = await loadOrCreateBrokerCa(join(layout.dir, 'ca'))
  copyFileSync(join(layout.dir, 'ca', 'ca.pem'), join(layout.publicDir, 'ca.pem'))
  const gateway = await startModelGateway({
    socketPath: join(layout.publicDir, 'gateway.sock'),
    authorize: (token) => grants.gateway(token),
    onUsage: (grant, usage, timing) => {
      const writes: Promise<unknown>[] = []
      for (const observe of observers) {
        try {
          const written = observe(grant, usage, timing)
          if (written instanceof Promise) writes.push(written)
        } catch (err) {
          opts.logger.warn('Berth model gateway: a model-call observer failed', {
            task_id: grant.task_id,
            error: String(err),
          })
        }
      }
      opts.metrics?.modelUsage(meteredUsage(grant, usage))
      return Promise.allSettled(writes)
    },
    logger: opts.logger,
  })
  const proxy = await startEgressProxy({
    socketPath: join(layout.publicDir, 'proxy.sock'),
    ca,
    authorize: (token) => grants.proxy(token),
    upstreamCa: opts.upstreamCa,
    logger: opts.logger,
    onRefused: opts.onEgressRefused,
  }).catch(async (err: unknown) => {
    await gateway.close()
    throw err
  })
  // A task's metered totals are kept while it runs (its budget is checked against them).
  const unsubscribe = opts.bus.subscribeAll((m) => {
    if (m.type === 'task.status' && isEndedStatus(m.status)) gateway.forget(m.task_id)
  })
  return {
    gateway,
    close: async () => {
      unsubscribe()
      await Promise.all([gateway.close(), proxy.close()])
    },
  }
}
