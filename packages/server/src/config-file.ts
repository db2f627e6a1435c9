/**
 * The optional config file (`berth.config.{ts,json}`): every setting has an environment
 * variable and a key in the file. The file's values are read as if they were environment
 * variables, so one parser checks both; a variable that is set (and not empty) wins.
 */

const GIT_PROVIDERS = ['github', 'gitlab', 'bitbucket'] as const
const GIT_SETTINGS = [
  'CLIENT_ID',
  'CLIENT_SECRET',
  'URL',
  'AUTHORIZE_URL',
  'TOKEN_URL',
  'API_URL',
  'REVOKE_URL',
  'SCOPES',
  'GIT_HOST',
  'CA_FILE',
] as const

/** `CLIENT_ID` → `clientId`. */
const camel = (name: string) => name.toLowerCase().replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())

/** Every setting: environment variable → key in the config file (dots for nesting). */
export const SETTINGS: Readonly<Record<string, string>> = {
  PORT: 'port',
  HOST: 'host',
  BERTH_PUBLIC_URL: 'publicUrl',
  BERTH_ADMIN_TOKEN: 'adminToken',
  BERTH_DATA_DIR: 'dataDir',
  BERTH_ENCRYPTION_KEY: 'encryptionKey',
  BERTH_STORAGE: 'storage',
  BERTH_REDIS_URL: 'redisUrl',
  BERTH_DATABASE_URL: 'databaseUrl',
  BERTH_DATABASE_CA_FILE: 'databaseCaFile',
  BERTH_REDIS_PREFIX: 'redisPrefix',
  BERTH_REDIS_TIMEOUT_MS: 'redisTimeoutMs',
  BERTH_INSTANCE_ID: 'instanceId',
  BERTH_RECONCILE_S: 'reconcileSeconds',
  BERTH_RUNTIME: 'runtime',
  BERTH_LOCAL_UNSANDBOXED: 'localUnsandboxed',
  BERTH_ENGINE_URL: 'engineUrl',
  BERTH_IMAGE: 'image',
  BERTH_RUNNER: 'runner',
  BERTH_RATE_RPM: 'rateLimit.rpm',
  BERTH_RATE_BURST: 'rateLimit.burst',
  BERTH_CONCURRENCY: 'concurrency',
  BERTH_CALLER_MAX_RUNNING: 'callers.maxRunning',
  BERTH_CALLER_POOL_SHARE: 'callers.poolShare',
  BERTH_MEMORY_BUDGET_MB: 'pool.memoryBudgetMb',
  BERTH_MEMORY_RESERVE_MB: 'pool.memoryReserveMb',
  BERTH_POOL_MIN: 'pool.min',
  BERTH_POOL_MAX: 'pool.max',
  BERTH_WARM_AGENTS: 'pool.warmAgents',
  BERTH_WARM_IDLE_S: 'pool.warmIdle',
  BERTH_TASK_TIME_LIMIT: 'tasks.timeLimit',
  BERTH_TASK_TIME_LIMIT_MAX: 'tasks.timeLimitMax',
  BERTH_PREVIEW_TTL_S: 'previews.ttl',
  BERTH_PREVIEW_TTL_MAX_S: 'previews.ttlMax',
  BERTH_SCHEDULE_MIN_INTERVAL_S: 'schedules.minInterval',
  BERTH_SCHEDULE_MAX_PER_CALLER: 'schedules.maxPerCaller',
  BERTH_INSTANCE_URL: 'instanceUrl',
  BERTH_POOL_NAME: 'pool.name',
  BERTH_BODY_LIMIT: 'bodyLimit',
  BERTH_AUDIT_RETENTION_DAYS: 'auditRetentionDays',
  BERTH_PROFILE_CACHE_MS: 'profileCacheMs',
  BERTH_SMTP_URL: 'smtp.url',
  BERTH_SMTP_FROM: 'smtp.from',
  BERTH_ALLOW_PRIVATE_WEBHOOKS: 'allowPrivateWebhooks',
  BERTH_ENV_DEFAULT_POLICY: 'environments.defaultPolicy',
  BERTH_ENV_POLICIES: 'environments.policies',
  BERTH_ENV_MAX_CPUS: 'environments.max.cpus',
  BERTH_ENV_MAX_MEMORY_MB: 'environments.max.memoryMb',
  BERTH_ENV_MAX_PIDS: 'environments.max.pids',
  BERTH_ENV_MAX_DISK_MB: 'environments.max.diskMb',
  BERTH_ENV_DEFAULT_DISK_MB: 'environments.defaults.diskMb',
  BERTH_ENV_TMP_MB: 'environments.tmpMb',
  BERTH_DISK_DIR: 'diskDir',
  BERTH_SNAPSHOT_QUOTA_MB: 'workspaceFiles.quotaMb',
  BERTH_CHECKPOINT_MAX_PER_SESSION: 'checkpoints.maxPerSession',
  BERTH_CHECKPOINT_MAX_MB: 'checkpoints.maxMb',
  BERTH_ENV_ALLOW_PRIVATE: 'environments.allowPrivate',
  BERTH_ENV_ALLOW_ROOT: 'environments.allowRoot',
  BERTH_ISOLATION: 'environments.isolation',
  BERTH_AGENT_USER: 'agentUser',
  BERTH_BROKER: 'broker',
  BERTH_BROKER_UPSTREAM_CA: 'brokerUpstreamCa',
  BERTH_METRICS: 'metrics.enabled',
  BERTH_METRICS_LISTEN: 'metrics.listen',
  ...Object.fromEntries(
    GIT_PROVIDERS.flatMap((p) =>
      // Bitbucket has no self-hosted layout to derive from one address (see config-integrations.ts).
      GIT_SETTINGS.filter((s) => !(p === 'bitbucket' && s === 'URL')).map((s) => [
        `BERTH_${p.toUpperCase()}_${s}`,
        `git.${p}.${camel(s)}`,
      ]),
    ),
  ),
  ...Object.fromEntries(
    ['CLIENT_ID', 'CLIENT_SECRET', 'SIGNING_SECRET', 'URL', 'AUTHORIZE_URL', 'TOKEN_URL', 'API_URL', 'SCOPES'].map(
      (s) => [`BERTH_CHAT_${s}`, `chat.${camel(s)}`],
    ),
  ),
  ...Object.fromEntries(
    ['CLIENT_ID', 'CLIENT_SECRET', 'AUTHORIZE_URL', 'TOKEN_URL', 'API_URL', 'USERINFO_URL', 'REVOKE_URL', 'SCOPES'].map(
      (s) => [`BERTH_MAIL_${s}`, `mail.${camel(s)}`],
    ),
  ),
  BERTH_BANK_API_URL: 'bank.apiUrl',
  BERTH_BANK_TIMEOUT_MS: 'bank.timeoutMs',
  BERTH_BANK_CERT_FILE: 'bank.certFile',
  BERTH_BANK_KEY_FILE: 'bank.keyFile',
  BERTH_BANK_CA_FILE: 'bank.caFile',
  BERTH_MESSENGER_API_URL: 'messenger.apiUrl',
  BERTH_MESSENGER_TIMEOUT_MS: 'messenger.timeoutMs',
}

const BY_KEY = new Map(Object.entries(SETTINGS).map(([env, key]) => [key, env]))

/** A loaded config file: its values and where they came from (for messages). */
export interface ConfigFile {
  /** The file's object, e.g. `{ port: 8080, git: { github: { clientId: '…' } } }`. */
  values: Record<string, unknown>
  /** Its path or name, e.g. `berth.config.json`. */
  path: string
}

/** Where each value of a merged record came from, when not from the environment. */
const origins = new WeakMap<object, Map<string, string>>()

/**
 * The name to show for a setting in a message: the variable, or the file key it was read
 * from (`pool.min in berth.config.json`).
 *
 * @example
 * ```ts
 * throw new Error(`${settingName(env, 'PORT')} must be a whole number`)
 * ```
 */
export function settingName(env: Record<string, string | undefined>, name: string): string {
  return origins.get(env)?.get(name) ?? name
}

/**
 * A setting that is missing, by both its names: `BERTH_GITHUB_CLIENT_SECRET (git.github.clientSecret)`.
 *
 * @example
 * ```ts
 * throw new Error(`${settingName(env, 'BERTH_SMTP_URL')} needs ${bothNames('BERTH_SMTP_FROM')}`)
 * ```
 */
export function bothNames(name: string): string {
  return SETTINGS[name] ? `${name} (${SETTINGS[name]})` : name
}

function flatten(
  values: Record<string, unknown>,
  file: string,
  prefix = '',
  out = new Map<string, string>(),
): Map<string, string> {
  for (const [k, value] of Object.entries(values)) {
    const key = prefix + k
    if (value === undefined || value === null) continue
    if (typeof value === 'object' && !Array.isArray(value)) {
      flatten(value as Record<string, unknown>, file, `${key}.`, out)
      continue
    }
    const env = BY_KEY.get(key)
    if (!env) throw new Error(`${file}: unknown setting "${key}" (the README's Configuration table lists every key)`)
    const scalar = (x: unknown) => typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean'
    if (Array.isArray(value) ? !value.every(scalar) : !scalar(value)) {
      throw new Error(`${file}: "${key}" must be a string, number, boolean or list of them`)
    }
    out.set(key, Array.isArray(value) ? value.join(',') : String(value))
  }
  return out
}

/**
 * The environment with the config file's values added under their variables' names,
 * where the environment does not set them (an empty variable counts as unset). Throws
 * for a key the file should not have.
 *
 * @example
 * ```ts
 * const env = withConfigFile(process.env, { values: { port: 8080 }, path: 'berth.config.json' })
 * env.PORT // '8080' unless PORT is set
 * ```
 */
export function withConfigFile(
  env: Record<string, string | undefined>,
  file: ConfigFile | undefined,
): Record<string, string | undefined> {
  if (!file) return env
  const merged: Record<string, string | undefined> = { ...env }
  const from = new Map<string, string>()
  for (const [key, value] of flatten(file.values, file.path)) {
    const name = BY_KEY.get(key)!
    if (env[name] !== undefined && env[name] !== '') continue
    merged[name] = value
    from.set(name, `${key} in ${file.path}`)
  }
  origins.set(merged, from)
  return merged
}
