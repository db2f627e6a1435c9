/** A Berth from the SETTINGS table: what `pnpm start` runs, for any process that reads its settings the same way. */
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Coordination } from '@berth/core'
import { createBerth } from '../berth.js'
import type { Berth } from '../berth-options.js'
import type { BerthConfig } from '../config.js'
import { containerDefaults } from './container-defaults.js'
import { coordinationFor, instanceIdFor } from './coordination-choice.js'
import { chooseRuntime, engineAtUrl, type ChosenRuntime } from './runtime-choice.js'
import { holdServerLease } from './server-lease.js'
import { storageFor } from './storage-choice.js'

/** What {@link berthFromConfig} started, and how to stop all of it. */
export interface ConfiguredBerth {
  berth: Berth
  runtime: ChosenRuntime
  coordination: Coordination | undefined
  /** Start-up lines safe to log: storage, runtime and pool, coordination, runner, credentials, environments. */
  summary: string[]
  /** Close the Berth, then the coordination and the runtime it was given; then release the data dir's lease. */
  close(): Promise<void>
}

/**
 * Open the store, choose the runtime (`BERTH_RUNTIME`, `BERTH_ENGINE_URL`), connect the
 * coordination and create the Berth that `config` (from `configFromEnv` or `loadSettings`)
 * describes, with the console on. Throws a message naming the setting that cannot work.
 *
 * @example
 * ```ts
 * const { berth, summary, close } = await berthFromConfig(configFromEnv(process.env))
 * for (const line of summary) console.log(line)
 * ```
 */
export async function berthFromConfig(
  config: BerthConfig,
  opts: { warn?: (line: string) => void } = {},
): Promise<ConfiguredBerth> {
  const warn = opts.warn ?? console.warn
  const dataDir = resolve(config.dataDir)
  // Held from the first step: `prune` refuses while this server runs (server-lease.ts).
  const lease = await holdServerLease(dataDir)
  try {
    return await configured(config, dataDir, warn, lease)
  } catch (err) {
    await lease.release()
    throw err
  }
}

async function configured(
  config: BerthConfig,
  dataDir: string,
  warn: (line: string) => void,
  lease: { release(): Promise<void> },
): Promise<ConfiguredBerth> {
  const { store, description } = await storageFor({ ...config, dataDir })
  const chosen = config.engineUrl
    ? await engineAtUrl(config.engineUrl, config.runtime)
    : chooseRuntime({
        runtime: config.runtime,
        dataDir,
        warn,
        diskDir: config.diskDir,
        localUnsandboxed: config.localUnsandboxed,
      })
  const container = containerDefaults(chosen, { ...config, dataDir, warn })
  const poolName = container.pool.name!
  const instanceId = instanceIdFor(config, poolName)
  const coordination = await coordinationFor(config, instanceId, warn).catch(async (err: Error) => {
    await chosen.runtime.close?.().catch(() => {})
    throw new Error(`coordination: ${err.message}`)
  })
  const berth = createBerth({
    store,
    ...(coordination && { coordination }),
    dataDir,
    encryptionKey: config.encryptionKey,
    adminToken: config.adminToken,
    rateLimit: { rpm: config.rateRpm, burst: config.rateBurst },
    bodyLimit: config.bodyLimit,
    auditRetentionDays: config.auditRetentionDays,
    profileCacheMs: config.profileCacheMs,
    workspaceFiles: { quotaBytes: config.snapshotQuotaMb * 1024 * 1024 },
    checkpoints: {
      maxPerSession: config.checkpoints.maxPerSession,
      maxBytes: config.checkpoints.maxMb * 1024 * 1024,
    },
    runtime: chosen.runtime,
    ...container,
    pool: {
      ...container.pool,
      ...(config.memoryBudgetMb && { memoryBudgetBytes: config.memoryBudgetMb * 1024 * 1024 }),
    },
    callerCaps: config.callerCaps,
    environments: { caps: config.environmentCaps, ...container.environments },
    concurrency: config.concurrency,
    taskTimeLimit: config.taskTimeLimit,
    previews: { ttl: config.previewTtl, publicUrl: config.publicUrl, instanceUrl: config.instanceUrl },
    playbookSchedule: config.schedules,
    reconcileMs: config.reconcileSeconds === 0 ? null : config.reconcileSeconds * 1000,
    console: true,
    allowPrivateWebhooks: config.allowPrivateWebhooks,
    ...(config.smtp && { smtp: config.smtp }),
    gitProviders: config.gitProviders,
    ...(config.chatProvider && { chatProvider: config.chatProvider }),
    ...(config.mailProvider && { mailProvider: config.mailProvider }),
    bankProvider: config.bankProvider,
    messenger: config.messenger,
    agentUser: config.agentUser,
    metrics: config.metrics,
    broker: config.broker && {
      ...(config.brokerUpstreamCa && { upstreamCa: [readFileSync(config.brokerUpstreamCa, 'utf8')] }),
    },
  })
  const local = chosen.name === 'local'
  const pool = container.pool
  const caps = config.environmentCaps
  const summary = [
    `Storage: ${description}`,
    `Runtime: ${chosen.description} · pool ${poolName}: min ${pool.min}, max ${pool.max}, warm agents ${pool.warmAgents} (idle ${config.warmIdleS} s)${local ? '' : `, image ${pool.image}`}`,
    ...(coordination ? [`Coordination: redis, prefix ${config.redisPrefix}, instance ${instanceId}`] : []),
    ...(container.runner.bundleDir ? [`Runner bundle: ${container.runner.bundleDir}`] : []),
    config.broker
      ? `Credentials: broker on (model gateway and egress proxy on sockets in ${resolve(dataDir, 'broker/public')})`
      : 'Credentials: broker OFF (BERTH_BROKER=off): the model key enters task containers',
    `Environments: default network ${caps.defaultPolicy}, offered ${caps.allowedPolicies.join('/')}${local ? '' : `, agent user ${config.agentUser}`}`,
  ]
  return {
    berth,
    runtime: chosen,
    coordination,
    summary,
    async close() {
      await berth.close()
      await coordination?.close()
      await chosen.runtime.close?.()
      await lease.release()
    },
  }
}

/**
 * The integrations callers can connect, for the start-up log (never a secret).
 *
 * @example
 * ```ts
 * integrationsLine(configFromEnv(process.env)) // 'github, chat' or 'none configured'
 * ```
 */
export function integrationsLine(c: BerthConfig): string {
  const on = [...Object.keys(c.gitProviders), ...(c.chatProvider ? ['chat'] : []), ...(c.mailProvider ? ['mail'] : [])]
  // Banking and messenger are always on; their API address is worth a mention when moved.
  const at = (name: string, url: string | undefined) => (url ? [`${name} at ${new URL(url).host}`] : [])
  return (
    [...on, ...at('bank', c.bankProvider.apiBaseUrl), ...at('messenger', c.messenger.apiBaseUrl)].join(', ') ||
    'none configured'
  )
}
