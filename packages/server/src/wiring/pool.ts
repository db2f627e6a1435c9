/** The container side of `createBerth`: the warm pool, warm agents, and the task engine and environment images the services get. */
import {
  ContainerPool,
  DEFAULT_ENVIRONMENT_CAPS,
  WarmAgents,
  adoptRunningWorkspaces,
  defaultPoolName,
  diskLimits,
  type Clock,
  type ContainerMount,
  type ContainerSpec,
  type RunTokens,
  type Logger,
  type Metrics,
  type ServicesOptions,
  type Store,
} from '@berth/core'
import { resolve } from 'node:path'
import type { ResolvedBerthOptions } from '../berth-options.js'
import { environmentImages } from '../environment-images.js'

/** What the container side is built over. */
export interface PoolWiringContext {
  store: Store
  clock: Clock
  logger: Logger
  metrics: Metrics
  /** The resolved data directory (the default pool name hashes it). */
  dataDir: string
  /** The credential broker: its mount in every container, and the tokens warm agents get. */
  broker?: { mounts: ContainerMount[]; tokens: RunTokens } | undefined
}

/** The pool, the warm agents, and the services' options that use them. */
export interface PoolWiring {
  pool: ContainerPool | undefined
  warmAgents: WarmAgents | undefined
  services: Pick<ServicesOptions, 'pool' | 'engine' | 'environmentCaps' | 'environmentImages'>
}

/**
 * The default environment's container spec: its network policy where the runtime enforces
 * it (an allowlist is made per task, as it names the task's model endpoint), the default
 * limits, the agent's user.
 */
function defaultEnvSpec(options: ResolvedBerthOptions, logger: Logger): Partial<ContainerSpec> {
  const runtime = options.runtime
  const caps = options.environments?.caps ?? DEFAULT_ENVIRONMENT_CAPS
  const agentUser = options.agentUser ?? '1000:1000'
  const enforced = runtime?.capabilities.egress ?? []
  if (runtime && options.pool && caps.defaultPolicy !== 'allowlist' && !enforced.includes(caps.defaultPolicy)) {
    logger.warn(
      `the ${runtime.name} runtime cannot enforce the ${caps.defaultPolicy} network policy: tasks of the default environment keep the host's network (see docs/ENVIRONMENTS.md)`,
    )
  }
  // Required of every container: on a runtime without it each create fails with that reason.
  const isolation = caps.isolation === 'gvisor' ? { isolation: 'gvisor' as const } : {}
  if (runtime && caps.isolation === 'gvisor') {
    const levels = runtime.isolations ? runtime.isolations() : Promise.resolve(['container'])
    levels.then(
      (l) =>
        l.includes('gvisor') ||
        logger.warn(
          `BERTH_ISOLATION is gvisor but the ${runtime.name} runtime has no gVisor: every task will fail (scripts/gvisor/ensure.sh)`,
        ),
      () => {},
    )
  }
  if (!runtime?.capabilities.isolation) return isolation
  return {
    ...isolation,
    // A pool spec naming a network of its own (an embedding's choice) keeps it.
    ...(options.pool?.spec?.network === undefined &&
      caps.defaultPolicy !== 'allowlist' &&
      enforced.includes(caps.defaultPolicy) && { egress: { policy: caps.defaultPolicy } }),
    limits: {
      cpus: caps.defaults.cpus,
      memoryBytes: caps.defaults.memory_mb * 1024 * 1024,
      pids: caps.defaults.pids,
      ...diskLimits(caps, null),
    },
    ...(agentUser !== 'root' && { user: agentUser }),
  }
}

/**
 * Build the container side from `createBerth`'s options: no pool without `options.pool`.
 * At start the pool keeps an in-use container it finds when the container's workspace is
 * still running (a task at work, or a warm session), read from the workspace records.
 *
 * @example
 * ```ts
 * const { pool, services } = wirePool({ runtime, pool: { image: 'berth-agent' } }, { store, clock, logger, dataDir })
 * createServices({ store, cipher, ...services })
 * ```
 */
export function wirePool(options: ResolvedBerthOptions, ctx: PoolWiringContext): PoolWiring {
  const caps = options.environments?.caps ?? DEFAULT_ENVIRONMENT_CAPS
  const runtime = options.runtime
  if (options.pool && !runtime) throw new Error('createBerth: `pool` needs a `runtime`')
  if (!runtime || !options.pool) return { pool: undefined, warmAgents: undefined, services: { environmentCaps: caps } }
  const runnerMount = options.runner?.bundleDir
    ? [
        {
          type: 'bind' as const,
          source: resolve(options.runner.bundleDir),
          target: '/opt/berth-runner',
          readOnly: true,
        },
      ]
    : []
  const command =
    options.runner?.command ?? (options.runner?.bundleDir ? ['node', '/opt/berth-runner/main.js'] : ['berth-runner'])
  const pool = new ContainerPool({
    runtime,
    store: ctx.store,
    clock: ctx.clock,
    logger: ctx.logger,
    metrics: ctx.metrics,
    image: options.pool.image,
    min: options.pool.min ?? 0,
    max: options.pool.max ?? 20,
    name: options.pool.name ?? defaultPoolName(ctx.dataDir),
    imageRecipe: options.pool.imageRecipe,
    retry: options.pool.retry,
    memoryBudgetBytes: options.pool.memoryBudgetBytes,
    spec: {
      ...defaultEnvSpec(options, ctx.logger),
      ...options.pool.spec,
      mounts: [...(options.pool.spec?.mounts ?? []), ...runnerMount, ...(ctx.broker?.mounts ?? [])],
    },
    adopt: adoptRunningWorkspaces(ctx.store),
  })
  const warmAgents = options.pool.warmAgents
    ? new WarmAgents({
        runtime,
        pool,
        command,
        logger: ctx.logger,
        max: options.pool.warmAgents,
        idleMs: options.pool.warmIdleMs,
        cwd: '/workspace',
        ...(ctx.broker && { tokens: { issuer: ctx.broker.tokens, store: ctx.store } }),
      })
    : undefined
  const recipe = options.environments?.recipe
  return {
    pool,
    warmAgents,
    services: {
      pool,
      engine: { runtime, pool, command, warmAgents },
      environmentCaps: caps,
      environmentImages: runtime.ensureImage
        ? environmentImages({ runtime, defaultRef: options.pool.image, recipe })
        : undefined,
    },
  }
}
