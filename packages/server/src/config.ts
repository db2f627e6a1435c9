import { totalmem } from 'node:os'
import { bothNames, settingName, withConfigFile, type ConfigFile } from './config-file.js'
import { integrationsFromEnv, type IntegrationsConfig } from './config-integrations.js'
import {
  DEFAULT_ENVIRONMENT_CAPS,
  DEFAULT_SCHEDULE_LIMITS,
  ISOLATIONS,
  MAX_SCHEDULE_MIN_INTERVAL_S,
  NETWORK_POLICIES,
  type EnvironmentCaps,
  type NetworkPolicy,
} from '@berth/core'

/** The standalone server's settings, read from the environment and an optional config file (README "Configuration"). */
export interface BerthConfig extends IntegrationsConfig {
  port: number
  host: string
  adminToken: string | undefined
  dataDir: string
  storage: 'fs' | 'sqlite' | 'memory' | 'redis' | 'postgres'
  redisUrl: string | undefined
  /** `BERTH_DATABASE_URL`: the Postgres database of `BERTH_STORAGE=postgres` (`postgres://…`, TLS with `?sslmode=`). */
  databaseUrl: string | undefined
  /** `BERTH_DATABASE_CA_FILE`: a PEM file of the private CA that signed the database's certificate. */
  databaseCaFile: string | undefined
  /** `BERTH_REDIS_PREFIX`: prefix of every Redis key and channel of this deployment (default `berth:`). */
  redisPrefix: string
  /** `BERTH_REDIS_TIMEOUT_MS`: how long a coordination call may wait for Redis before failing (503 to callers; default 3000). */
  redisTimeoutMs: number
  /** `BERTH_INSTANCE_ID`: this instance among those sharing one Redis; unset, the host name and pool name. */
  instanceId: string | undefined
  /** `BERTH_RECONCILE_S`: with Redis, how often the coordination is reconciled with the store (seconds; 0: never). */
  reconcileSeconds: number
  encryptionKey: string | undefined
  runtime: 'auto' | 'docker' | 'podman' | 'local'
  /** `BERTH_LOCAL_UNSANDBOXED=true`: with `BERTH_RUNTIME=local` and no bubblewrap, run agents as plain host processes anyway. */
  localUnsandboxed: boolean
  /** `BERTH_ENGINE_URL`: the Docker or Podman engine to drive (`unix://`, `tcp://`, `https://`, `ssh://`); unset, `DOCKER_HOST`/`CONTAINER_HOST` or the local socket. */
  engineUrl: string | undefined
  image: string | undefined
  /** `bundle`: mount a runner built from this install; `image`: the image has it at /opt/berth-runner. */
  runner: 'bundle' | 'image'
  rateRpm: number
  rateBurst: number
  concurrency: number
  /** `BERTH_CALLER_MAX_RUNNING` / `BERTH_CALLER_POOL_SHARE`: per-caller caps (null: none). */
  callerCaps: { maxRunning: number | null; poolShare: number | null }
  /** `BERTH_MEMORY_BUDGET_MB` (default: host memory less `BERTH_MEMORY_RESERVE_MB`): containers' memory caps sum to at most this (null: none). */
  memoryBudgetMb: number | null
  /** `BERTH_POOL_MIN`: idle containers kept (default from the memory budget: 1 or 2; 0 with `BERTH_RUNTIME=local`). */
  poolMin: number
  poolMax: number
  /** `BERTH_WARM_AGENTS`: agents started ahead of tasks, at most (0: off; default from the memory budget). */
  warmAgents: number
  /** `BERTH_WARM_IDLE_S`: a parked agent no task took for this long gives its container back (seconds). */
  warmIdleS: number
  /** `BERTH_TASK_TIME_LIMIT` / `_MAX`: a task's wall time once running, default and cap, in seconds (0: none). */
  taskTimeLimit: { defaultS: number | null; maxS: number | null }
  /** `BERTH_PREVIEW_TTL_S` / `_MAX_S`: a preview link's lifetime, default and cap, in seconds. */
  previewTtl: { defaultS: number; maxS: number }
  /** `BERTH_SCHEDULE_MIN_INTERVAL_S` / `BERTH_SCHEDULE_MAX_PER_CALLER`: the least time between two runs of a schedule (s), active schedules per caller (null: none). */
  schedules: { minIntervalS: number; maxPerCaller: number | null }
  /** `BERTH_INSTANCE_URL`: where the other instances reach this one (preview requests for its containers are forwarded there). */
  instanceUrl: string | undefined
  /** `BERTH_POOL_NAME`: the `berth.pool` label of this server's containers; unset, derived from the data dir. */
  poolName: string | undefined
  bodyLimit: number
  /** `BERTH_AUDIT_RETENTION_DAYS`: how long audit entries are kept. */
  auditRetentionDays: number
  /** `BERTH_PROFILE_CACHE_MS`: how long an instance answers a profile read from memory (0: never). */
  profileCacheMs: number
  /** Outgoing mail for email integrations, from `BERTH_SMTP_URL` (`smtp://user:pass@host:587`, `smtps://…` for TLS) and `BERTH_SMTP_FROM`. */
  smtp: { host: string; port: number; secure: boolean; auth?: { user: string; pass: string }; from: string } | undefined
  /** Let webhook integrations target private and loopback addresses (`BERTH_ALLOW_PRIVATE_WEBHOOKS=true`). */
  allowPrivateWebhooks: boolean
  /** Environments: default network policy, the policies offered, the most a caller may ask for (`BERTH_ENV_*`). */
  environmentCaps: EnvironmentCaps
  /** `BERTH_DISK_DIR`: where workspaces (Docker, Podman, local) get their sized disks (default `<dataDir>/disks`; `null` when `off`). */
  diskDir: string | null | undefined
  /** `BERTH_SNAPSHOT_QUOTA_MB`: the bytes of kept batch workspace files per caller (MiB). */
  snapshotQuotaMb: number
  /** `BERTH_CHECKPOINT_MAX_PER_SESSION` / `BERTH_CHECKPOINT_MAX_MB`: the newest checkpoints kept per session (0: none), and the largest workspace checkpointed (MiB). */
  checkpoints: { maxPerSession: number; maxMb: number }
  /** `BERTH_AGENT_USER`: the user the agent runs as in Docker/Podman containers (default `1000:1000`; `root` to opt out). */
  agentUser: string
  /** `BERTH_BROKER`: the credential broker (`on`, default) or `off` (the model key then enters containers). */
  broker: boolean
  /** `BERTH_BROKER_UPSTREAM_CA`: a PEM file of extra roots the egress proxy trusts towards upstream hosts. */
  brokerUpstreamCa: string | undefined
  /** `BERTH_METRICS`: Prometheus metrics (`on`, default in the standalone server, or `off`). */
  metrics: boolean
  /** `BERTH_METRICS_LISTEN`: `host:port` of a separate, unauthenticated listener for `GET /metrics` (unset: the main listener, behind the operator token). */
  metricsListen: { host: string; port: number } | undefined
}

/** A `host:port` address (`[::1]:9464` for IPv6), or undefined when unset. */
function listenAddress(
  env: Record<string, string | undefined>,
  name: string,
): { host: string; port: number } | undefined {
  const raw = env[name]
  if (!raw) return undefined
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(raw)
  if (!m || Number(m[2]) > 65535) throw new Error(`${settingName(env, name)} must be host:port, got "${raw}"`)
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) }
}

/** A positive number (CPUs may be fractional), or the default; `0` means no cap. */
function cap(env: Record<string, string | undefined>, name: string, fallback: number | null): number | null {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+(\.\d+)?$/.test(raw))
    throw new Error(`${settingName(env, name)} must be a number (0: no cap), got "${raw}"`)
  return Number(raw) === 0 ? null : Number(raw)
}

function environmentCaps(env: Record<string, string | undefined>): EnvironmentCaps {
  const d = DEFAULT_ENVIRONMENT_CAPS
  const policiesRaw = env.BERTH_ENV_POLICIES
  const policies = policiesRaw
    ? policiesRaw
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean)
    : [...d.allowedPolicies]
  for (const p of policies) {
    if (!(NETWORK_POLICIES as readonly string[]).includes(p))
      throw new Error(
        `${settingName(env, 'BERTH_ENV_POLICIES')} lists "${p}"; the policies are ${NETWORK_POLICIES.join(', ')}`,
      )
  }
  const defaultPolicy = oneOf(env, 'BERTH_ENV_DEFAULT_POLICY', NETWORK_POLICIES, d.defaultPolicy)
  if (!policies.includes(defaultPolicy)) {
    throw new Error(
      `${settingName(env, 'BERTH_ENV_DEFAULT_POLICY')} (${defaultPolicy}) must be one of ${settingName(env, 'BERTH_ENV_POLICIES')} (${policies.join(', ')})`,
    )
  }
  const max = {
    cpus: cap(env, 'BERTH_ENV_MAX_CPUS', d.max.cpus),
    memory_mb: cap(env, 'BERTH_ENV_MAX_MEMORY_MB', d.max.memory_mb),
    pids: cap(env, 'BERTH_ENV_MAX_PIDS', d.max.pids),
    disk_mb: cap(env, 'BERTH_ENV_MAX_DISK_MB', d.max.disk_mb),
  }
  // The defaults never exceed the caps.
  const diskMb = cap(env, 'BERTH_ENV_DEFAULT_DISK_MB', d.defaults.disk_mb ?? null)
  const defaults = {
    cpus: Math.min(d.defaults.cpus, max.cpus ?? Infinity),
    memory_mb: Math.min(d.defaults.memory_mb, max.memory_mb ?? Infinity),
    pids: Math.min(d.defaults.pids, max.pids ?? Infinity),
    disk_mb: diskMb === null ? max.disk_mb : Math.min(diskMb, max.disk_mb ?? Infinity),
    tmp_mb: int(env, 'BERTH_ENV_TMP_MB', d.defaults.tmp_mb ?? 512, 16),
  }
  const allowPrivateDestinations = oneOf(env, 'BERTH_ENV_ALLOW_PRIVATE', ['true', 'false'] as const, 'false') === 'true'
  const allowRoot = oneOf(env, 'BERTH_ENV_ALLOW_ROOT', ['true', 'false'] as const, 'false') === 'true'
  const isolation = oneOf(env, 'BERTH_ISOLATION', ISOLATIONS, 'container')
  return {
    defaultPolicy,
    allowedPolicies: policies as NetworkPolicy[],
    max,
    defaults,
    allowPrivateDestinations,
    allowRoot,
    isolation,
  }
}

/** The containers' memory budget in MiB: set, or the host's memory less the reserve; null: none. */
function memoryBudget(env: Record<string, string | undefined>): number | null {
  const set = env.BERTH_MEMORY_BUDGET_MB
  if (set !== undefined && set !== '') return int(env, 'BERTH_MEMORY_BUDGET_MB', 0, 0) || null
  const reserve = int(env, 'BERTH_MEMORY_RESERVE_MB', 2048, 0)
  return Math.max(256, Math.floor(totalmem() / 1024 ** 2) - reserve)
}

/**
 * The warm path's defaults for a memory budget. `fit` is how many containers of the default
 * memory cap the budget holds (the pool's max without a budget, never more): one idle
 * container when two fit and two from eight, so a first task waits for no container create
 * (a 24 GB host: 2; 8 GB: 1); warm agents up to half of what fits, at most four, as parked
 * agents hold containers the tasks may need (a cold task evicts one when the pool is full).
 */
function warmDefaults(budgetMb: number | null, containerMb: number, poolMax: number) {
  const fit = Math.min(poolMax, budgetMb === null ? poolMax : Math.floor(budgetMb / containerMb))
  return { poolMin: fit >= 8 ? 2 : fit >= 2 ? 1 : 0, warmAgents: Math.min(4, Math.floor(fit / 2)) }
}

function smtpFrom(env: Record<string, string | undefined>): BerthConfig['smtp'] {
  const raw = env.BERTH_SMTP_URL
  if (!raw) return undefined
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new Error(`${settingName(env, 'BERTH_SMTP_URL')} must be a URL like smtp://user:pass@host:587`)
  }
  if (url.protocol !== 'smtp:' && url.protocol !== 'smtps:')
    throw new Error(`${settingName(env, 'BERTH_SMTP_URL')} must start with smtp:// or smtps://`)
  const secure = url.protocol === 'smtps:'
  const from = env.BERTH_SMTP_FROM
  if (!from)
    throw new Error(`${settingName(env, 'BERTH_SMTP_URL')} needs ${bothNames('BERTH_SMTP_FROM')} (the sender address)`)
  return {
    host: url.hostname,
    port: url.port ? Number(url.port) : secure ? 465 : 587,
    secure,
    auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
    from,
  }
}

function int(env: Record<string, string | undefined>, name: string, fallback: number, min: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!/^\d+$/.test(raw) || Number(raw) < min)
    throw new Error(`${settingName(env, name)} must be a whole number >= ${min}, got "${raw}"`)
  return Number(raw)
}

function oneOf<T extends string>(
  env: Record<string, string | undefined>,
  name: string,
  allowed: readonly T[],
  fallback: T,
): T {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  if (!(allowed as readonly string[]).includes(raw))
    throw new Error(`${settingName(env, name)} must be one of ${allowed.join(', ')}, got "${raw}"`)
  return raw as T
}

/**
 * Read the configuration from environment variables and, optionally, a config file's
 * values (a variable that is set wins over the file), with the embedded defaults. Throws
 * a clear message naming the variable or file key for a value that cannot be right (the
 * server then refuses to start).
 *
 * @example
 * ```ts
 * const config = configFromEnv(process.env, { values: { pool: { max: 8 } }, path: 'berth.config.json' })
 * config.port // 3000 unless PORT is set
 * ```
 */
export function configFromEnv(env: Record<string, string | undefined> = process.env, file?: ConfigFile): BerthConfig {
  env = withConfigFile(env, file)
  const caps = environmentCaps(env)
  const memoryBudgetMb = memoryBudget(env)
  const poolMax = int(env, 'BERTH_POOL_MAX', 20, 1)
  const warm = warmDefaults(memoryBudgetMb, caps.defaults.memory_mb, poolMax)
  const config: BerthConfig = {
    port: int(env, 'PORT', 3000, 0),
    host: env.HOST || '127.0.0.1',
    adminToken: env.BERTH_ADMIN_TOKEN || undefined,
    dataDir: env.BERTH_DATA_DIR || './.data',
    storage: oneOf(env, 'BERTH_STORAGE', ['fs', 'sqlite', 'memory', 'redis', 'postgres'] as const, 'fs'),
    redisUrl: env.BERTH_REDIS_URL || undefined,
    databaseUrl: env.BERTH_DATABASE_URL || undefined,
    databaseCaFile: env.BERTH_DATABASE_CA_FILE || undefined,
    redisPrefix: env.BERTH_REDIS_PREFIX || 'berth:',
    redisTimeoutMs: int(env, 'BERTH_REDIS_TIMEOUT_MS', 3_000, 100),
    instanceId: env.BERTH_INSTANCE_ID || undefined,
    reconcileSeconds: int(env, 'BERTH_RECONCILE_S', 30, 0),
    encryptionKey: env.BERTH_ENCRYPTION_KEY || undefined,
    runtime: oneOf(env, 'BERTH_RUNTIME', ['auto', 'docker', 'podman', 'local'] as const, 'auto'),
    localUnsandboxed: oneOf(env, 'BERTH_LOCAL_UNSANDBOXED', ['true', 'false'] as const, 'false') === 'true',
    engineUrl: env.BERTH_ENGINE_URL || undefined,
    image: env.BERTH_IMAGE || undefined,
    runner: oneOf(env, 'BERTH_RUNNER', ['bundle', 'image'] as const, 'bundle'),
    rateRpm: int(env, 'BERTH_RATE_RPM', 60, 1),
    rateBurst: int(env, 'BERTH_RATE_BURST', 10, 1),
    concurrency: int(env, 'BERTH_CONCURRENCY', 5, 1),
    callerCaps: {
      maxRunning: int(env, 'BERTH_CALLER_MAX_RUNNING', 0, 0) || null,
      poolShare: cap(env, 'BERTH_CALLER_POOL_SHARE', 0.5),
    },
    memoryBudgetMb,
    // A local sandbox is quick to make, and its disk mounts would outlive a stopped server.
    poolMin: int(env, 'BERTH_POOL_MIN', env.BERTH_RUNTIME === 'local' ? 0 : warm.poolMin, 0),
    poolMax,
    warmAgents: int(env, 'BERTH_WARM_AGENTS', warm.warmAgents, 0),
    warmIdleS: int(env, 'BERTH_WARM_IDLE_S', 600, 1),
    taskTimeLimit: {
      defaultS: int(env, 'BERTH_TASK_TIME_LIMIT', 3_600, 0) || null,
      maxS: int(env, 'BERTH_TASK_TIME_LIMIT_MAX', 86_400, 0) || null,
    },
    previewTtl: {
      defaultS: int(env, 'BERTH_PREVIEW_TTL_S', 3_600, 1),
      maxS: int(env, 'BERTH_PREVIEW_TTL_MAX_S', 86_400, 1),
    },
    schedules: {
      minIntervalS: int(env, 'BERTH_SCHEDULE_MIN_INTERVAL_S', DEFAULT_SCHEDULE_LIMITS.minIntervalS, 0),
      maxPerCaller: int(env, 'BERTH_SCHEDULE_MAX_PER_CALLER', DEFAULT_SCHEDULE_LIMITS.maxPerCaller, 0) || null,
    },
    instanceUrl: env.BERTH_INSTANCE_URL || undefined,
    poolName: env.BERTH_POOL_NAME || undefined,
    bodyLimit: int(env, 'BERTH_BODY_LIMIT', 1024 * 1024, 1024),
    auditRetentionDays: int(env, 'BERTH_AUDIT_RETENTION_DAYS', 365, 1),
    profileCacheMs: int(env, 'BERTH_PROFILE_CACHE_MS', 1_000, 0),
    smtp: smtpFrom(env),
    allowPrivateWebhooks: oneOf(env, 'BERTH_ALLOW_PRIVATE_WEBHOOKS', ['true', 'false'] as const, 'false') === 'true',
    environmentCaps: caps,
    // Unset: `<dataDir>/disks` of the data dir as finally resolved (see chooseRuntime).
    diskDir: env.BERTH_DISK_DIR === 'off' ? null : env.BERTH_DISK_DIR || undefined,
    snapshotQuotaMb: int(env, 'BERTH_SNAPSHOT_QUOTA_MB', 1024, 1),
    checkpoints: {
      maxPerSession: int(env, 'BERTH_CHECKPOINT_MAX_PER_SESSION', 50, 0),
      maxMb: int(env, 'BERTH_CHECKPOINT_MAX_MB', 1024, 1),
    },
    agentUser: env.BERTH_AGENT_USER || '1000:1000',
    broker: oneOf(env, 'BERTH_BROKER', ['on', 'off'] as const, 'on') === 'on',
    brokerUpstreamCa: env.BERTH_BROKER_UPSTREAM_CA || undefined,
    metrics: oneOf(env, 'BERTH_METRICS', ['on', 'off'] as const, 'on') === 'on',
    metricsListen: listenAddress(env, 'BERTH_METRICS_LISTEN'),
    ...integrationsFromEnv(env),
  }
  if (config.metricsListen && !config.metrics)
    throw new Error(
      `${settingName(env, 'BERTH_METRICS_LISTEN')} is set, but ${settingName(env, 'BERTH_METRICS')} is off`,
    )
  if ((config.callerCaps.poolShare ?? 0) > 1)
    throw new Error(
      `${settingName(env, 'BERTH_CALLER_POOL_SHARE')} must be a share of the pool between 0 and 1 (0: none), got ${config.callerCaps.poolShare}`,
    )
  if (config.port > 65535) throw new Error(`${settingName(env, 'PORT')} must be at most 65535, got ${config.port}`)
  if (config.poolMin > config.poolMax)
    throw new Error(
      `${settingName(env, 'BERTH_POOL_MIN')} (${config.poolMin}) must not exceed ${settingName(env, 'BERTH_POOL_MAX')} (${config.poolMax})`,
    )
  const { defaultS, maxS } = config.taskTimeLimit
  if (defaultS !== null && maxS !== null && defaultS > maxS)
    throw new Error(
      `${settingName(env, 'BERTH_TASK_TIME_LIMIT')} (${defaultS}) must not exceed ${settingName(env, 'BERTH_TASK_TIME_LIMIT_MAX')} (${maxS})`,
    )
  if (config.previewTtl.defaultS > config.previewTtl.maxS)
    throw new Error(
      `${settingName(env, 'BERTH_PREVIEW_TTL_S')} (${config.previewTtl.defaultS}) must not exceed ${settingName(env, 'BERTH_PREVIEW_TTL_MAX_S')} (${config.previewTtl.maxS})`,
    )
  if (config.schedules.minIntervalS > MAX_SCHEDULE_MIN_INTERVAL_S)
    throw new Error(
      `${settingName(env, 'BERTH_SCHEDULE_MIN_INTERVAL_S')} must be at most ${MAX_SCHEDULE_MIN_INTERVAL_S} (a day), got ${config.schedules.minIntervalS}`,
    )
  if (config.instanceUrl !== undefined && !/^https?:\/\/[^/?#]+\/?$/.test(config.instanceUrl))
    throw new Error(
      `${settingName(env, 'BERTH_INSTANCE_URL')} must be http(s)://host:port, got "${config.instanceUrl}"`,
    )
  if (config.poolName !== undefined && !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(config.poolName)) {
    throw new Error(
      `${settingName(env, 'BERTH_POOL_NAME')} must be 1-63 letters, digits, '_', '.' or '-' (starting with a letter or digit), got "${config.poolName}"`,
    )
  }
  if (!/^(root|[0-9]{1,9}(:[0-9]{1,9})?)$/.test(config.agentUser))
    throw new Error(`${settingName(env, 'BERTH_AGENT_USER')} must be uid[:gid] or root, got "${config.agentUser}"`)
  if (config.engineUrl !== undefined && !/^(unix:\/\/\/|\/|(tcp|https?|ssh):\/\/[^/])/.test(config.engineUrl)) {
    throw new Error(
      `${settingName(env, 'BERTH_ENGINE_URL')} must be unix:///path, tcp://host:port, https://host:port or ssh://user@host, got "${config.engineUrl}"`,
    )
  }
  if (config.engineUrl !== undefined && config.runtime === 'local')
    throw new Error(
      `${settingName(env, 'BERTH_ENGINE_URL')} names an engine, but ${settingName(env, 'BERTH_RUNTIME')} is local`,
    )
  if (config.instanceId !== undefined && !/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/.test(config.instanceId)) {
    throw new Error(
      `${settingName(env, 'BERTH_INSTANCE_ID')} must be 1-128 letters, digits, '_', '.', ':' or '-' (starting with a letter or digit), got "${config.instanceId}"`,
    )
  }
  if (!/^[\x21-\x7e]{1,64}$/.test(config.redisPrefix))
    throw new Error(
      `${settingName(env, 'BERTH_REDIS_PREFIX')} must be 1-64 printable characters without spaces, got "${config.redisPrefix}"`,
    )
  if (config.storage === 'redis' && !config.redisUrl)
    throw new Error(`${settingName(env, 'BERTH_STORAGE')}=redis needs ${bothNames('BERTH_REDIS_URL')}`)
  if (config.storage === 'postgres' && !config.databaseUrl)
    throw new Error(
      `${settingName(env, 'BERTH_STORAGE')}=postgres needs ${bothNames('BERTH_DATABASE_URL')} (postgres://user:password@host:5432/db)`,
    )
  if (config.databaseUrl !== undefined && !/^postgres(ql)?:\/\/./.test(config.databaseUrl))
    throw new Error(`${settingName(env, 'BERTH_DATABASE_URL')} must start with postgres:// or postgresql://`)
  return config
}
