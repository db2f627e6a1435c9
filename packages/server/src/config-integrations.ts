import { readFileSync } from 'node:fs'
import { bothNames, settingName } from './config-file.js'
import type { GitProviderConfig, GitProvidersConfig } from './git/providers.js'
import type { ChatProviderConfig } from './notifiers/chat-provider.js'
import type { ClientCertificate } from './notifiers/client-certificate.js'
import type { MailProviderConfig } from './notifiers/mail-provider.js'

type Env = Record<string, string | undefined>

/** The third-party integrations of the standalone server (README "Configuration"). */
export interface IntegrationsConfig {
  /** Where browsers and providers reach this server (`BERTH_PUBLIC_URL`): OAuth redirect URIs and the messenger webhook are made from it. Default: each request's origin. */
  publicUrl: string | undefined
  /** Git providers with a client id and secret (`BERTH_GITHUB_*`, `BERTH_GITLAB_*`, `BERTH_BITBUCKET_*`). */
  gitProviders: GitProvidersConfig
  /** The chat provider app (`BERTH_CHAT_*`), when its client id is set. */
  chatProvider: ChatProviderConfig | undefined
  /** The mail provider client (`BERTH_MAIL_*`), when its client id is set. */
  mailProvider: MailProviderConfig | undefined
  /** The banking-data provider's API (`BERTH_BANK_*`). */
  bankProvider: { apiBaseUrl?: string; timeoutMs?: number; clientCertificate?: ClientCertificate }
  /** The messenger's Bot API (`BERTH_MESSENGER_*`). */
  messenger: { apiBaseUrl?: string; timeoutMs?: number; publicUrl?: string }
}

/** `{ a: 1, b: undefined }` → `{ a: 1 }`, so defaults further down apply. */
function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T
}

const value = (env: Env, name: string) => (env[name] === '' ? undefined : env[name])

/** An http(s) URL without its trailing slashes, or undefined when unset. */
function url(env: Env, name: string): string | undefined {
  const raw = value(env, name)
  if (raw === undefined) return undefined
  let parsed: URL
  try {
    parsed = new URL(raw)
  } catch {
    throw new Error(`${settingName(env, name)} must be a URL like https://host.example, got "${raw}"`)
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new Error(`${settingName(env, name)} must be an http:// or https:// URL, got "${raw}"`)
  return raw.replace(/\/+$/, '')
}

function milliseconds(env: Env, name: string): number | undefined {
  const raw = value(env, name)
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw) || Number(raw) < 1)
    throw new Error(`${settingName(env, name)} must be a whole number of milliseconds >= 1, got "${raw}"`)
  return Number(raw)
}

/** `a, b c` → `['a', 'b', 'c']`. */
function list(env: Env, name: string): string[] | undefined {
  const raw = value(env, name)
  return raw === undefined ? undefined : raw.split(/[\s,]+/).filter(Boolean)
}

function pemFile(env: Env, name: string): string | undefined {
  const path = value(env, name)
  if (path === undefined) return undefined
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw new Error(
      `${settingName(env, name)}: cannot read "${path}" (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    )
  }
  if (!text.includes('-----BEGIN ')) throw new Error(`${settingName(env, name)}: "${path}" holds no PEM data`)
  return text
}

/**
 * The client id and secret under `prefix`, or undefined when neither is set. Any other
 * setting of that provider without them is a mistake worth stopping for.
 */
function client(
  env: Env,
  prefix: string,
  settings: readonly string[],
): { clientId: string; clientSecret: string } | undefined {
  const id = value(env, `${prefix}_CLIENT_ID`)
  const secret = value(env, `${prefix}_CLIENT_SECRET`)
  if (id && secret) return { clientId: id, clientSecret: secret }
  if (id)
    throw new Error(
      `${settingName(env, `${prefix}_CLIENT_ID`)} is set but ${bothNames(`${prefix}_CLIENT_SECRET`)} is not`,
    )
  if (secret)
    throw new Error(
      `${settingName(env, `${prefix}_CLIENT_SECRET`)} is set but ${bothNames(`${prefix}_CLIENT_ID`)} is not`,
    )
  const stray = settings.find((s) => value(env, `${prefix}_${s}`) !== undefined)
  if (stray)
    throw new Error(
      `${settingName(env, `${prefix}_${stray}`)} needs ${bothNames(`${prefix}_CLIENT_ID`)} and ${bothNames(`${prefix}_CLIENT_SECRET`)}`,
    )
  return undefined
}

/**
 * A self-hosted instance's endpoints from its web address: GitHub Enterprise Server
 * (`/login/oauth/…`, REST API at `/api/v3`) and GitLab (`/oauth/…`, `/api/v4`).
 * Bitbucket has no such layout to derive, so it takes its URLs one by one (Bitbucket
 * Server's REST API has no `/user` to read the account from: not supported yet).
 */
const SELF_HOSTED: Partial<Record<keyof GitProvidersConfig, (base: string) => Partial<GitProviderConfig>>> = {
  github: (b) => ({
    authorizeUrl: `${b}/login/oauth/authorize`,
    tokenUrl: `${b}/login/oauth/access_token`,
    apiBaseUrl: `${b}/api/v3`,
    gitHost: new URL(b).host,
  }),
  gitlab: (b) => ({
    authorizeUrl: `${b}/oauth/authorize`,
    tokenUrl: `${b}/oauth/token`,
    apiBaseUrl: `${b}/api/v4`,
    revokeUrl: `${b}/oauth/revoke`,
    gitHost: new URL(b).host,
  }),
}

const GIT_OTHER = [
  'URL',
  'AUTHORIZE_URL',
  'TOKEN_URL',
  'API_URL',
  'REVOKE_URL',
  'SCOPES',
  'GIT_HOST',
  'CA_FILE',
] as const

function gitProvider(
  env: Env,
  name: keyof GitProvidersConfig,
  publicUrl: string | undefined,
): GitProviderConfig | undefined {
  const prefix = `BERTH_${name.toUpperCase()}`
  const credentials = client(env, prefix, GIT_OTHER)
  if (!credentials) return undefined
  const base = url(env, `${prefix}_URL`)
  const derive = SELF_HOSTED[name]
  if (base && !derive)
    throw new Error(
      `${settingName(env, `${prefix}_URL`)} is not supported: set ${prefix}_AUTHORIZE_URL, _TOKEN_URL and _API_URL instead`,
    )
  const explicit: Partial<GitProviderConfig> = {
    authorizeUrl: url(env, `${prefix}_AUTHORIZE_URL`),
    tokenUrl: url(env, `${prefix}_TOKEN_URL`),
    apiBaseUrl: url(env, `${prefix}_API_URL`),
    revokeUrl: url(env, `${prefix}_REVOKE_URL`),
    scopes: list(env, `${prefix}_SCOPES`),
    gitHost: value(env, `${prefix}_GIT_HOST`),
    gitCaCert: pemFile(env, `${prefix}_CA_FILE`),
    redirectUri: publicUrl && `${publicUrl}/v1/integrations/git/${name}/callback`,
  }
  return { ...credentials, ...(base && derive!(base)), ...defined(explicit) }
}

function chatProvider(env: Env, publicUrl: string | undefined): ChatProviderConfig | undefined {
  const credentials = client(env, 'BERTH_CHAT', [
    'SIGNING_SECRET',
    'URL',
    'AUTHORIZE_URL',
    'TOKEN_URL',
    'API_URL',
    'SCOPES',
  ])
  if (!credentials) return undefined
  // A Slack-shaped host keeps OAuth and the Web API under one address.
  const base = url(env, 'BERTH_CHAT_URL')
  const config: ChatProviderConfig = {
    ...credentials,
    signingSecret: value(env, 'BERTH_CHAT_SIGNING_SECRET'),
    authorizeUrl: url(env, 'BERTH_CHAT_AUTHORIZE_URL') ?? (base && `${base}/oauth/v2/authorize`),
    tokenUrl: url(env, 'BERTH_CHAT_TOKEN_URL') ?? (base && `${base}/api/oauth.v2.access`),
    apiBaseUrl: url(env, 'BERTH_CHAT_API_URL') ?? (base && `${base}/api`),
    scopes: list(env, 'BERTH_CHAT_SCOPES'),
    redirectUri: publicUrl && `${publicUrl}/api/chatprovider/callback`,
  }
  return defined(config)
}

function mailProvider(env: Env, publicUrl: string | undefined): MailProviderConfig | undefined {
  const credentials = client(env, 'BERTH_MAIL', [
    'AUTHORIZE_URL',
    'TOKEN_URL',
    'API_URL',
    'USERINFO_URL',
    'REVOKE_URL',
    'SCOPES',
  ])
  if (!credentials) return undefined
  const config: MailProviderConfig = {
    ...credentials,
    authorizeUrl: url(env, 'BERTH_MAIL_AUTHORIZE_URL'),
    tokenUrl: url(env, 'BERTH_MAIL_TOKEN_URL'),
    apiBaseUrl: url(env, 'BERTH_MAIL_API_URL'),
    userinfoUrl: url(env, 'BERTH_MAIL_USERINFO_URL'),
    revokeUrl: url(env, 'BERTH_MAIL_REVOKE_URL'),
    scopes: list(env, 'BERTH_MAIL_SCOPES'),
    redirectUri: publicUrl && `${publicUrl}/api/mailprovider/callback`,
  }
  return defined(config)
}

/** The banking API's client certificate: both files or neither, and a CA file only with them. */
function bankCertificate(env: Env): ClientCertificate | undefined {
  const cert = pemFile(env, 'BERTH_BANK_CERT_FILE')
  const key = pemFile(env, 'BERTH_BANK_KEY_FILE')
  const ca = pemFile(env, 'BERTH_BANK_CA_FILE')
  if (cert && key) return defined({ cert, key, ca })
  if (cert || key)
    throw new Error(
      `${settingName(env, cert ? 'BERTH_BANK_CERT_FILE' : 'BERTH_BANK_KEY_FILE')} is set but ${bothNames(cert ? 'BERTH_BANK_KEY_FILE' : 'BERTH_BANK_CERT_FILE')} is not`,
    )
  if (ca)
    throw new Error(
      `${settingName(env, 'BERTH_BANK_CA_FILE')} needs ${bothNames('BERTH_BANK_CERT_FILE')} and ${bothNames('BERTH_BANK_KEY_FILE')}`,
    )
  return undefined
}

/**
 * The integrations' settings from the environment (and a config file merged into it, see
 * `withConfigFile`). A provider is on when its client id and secret are set; the banking
 * and messenger APIs are always on, at their public endpoints unless told otherwise.
 * Throws a message naming the setting for a value that cannot be right.
 *
 * @example
 * ```ts
 * const { gitProviders } = integrationsFromEnv({ BERTH_GITLAB_CLIENT_ID: 'id', BERTH_GITLAB_CLIENT_SECRET: 's', BERTH_GITLAB_URL: 'https://gitlab.internal' })
 * gitProviders.gitlab?.apiBaseUrl // 'https://gitlab.internal/api/v4'
 * ```
 */
export function integrationsFromEnv(env: Env): IntegrationsConfig {
  const publicUrl = url(env, 'BERTH_PUBLIC_URL')
  const gitProviders: GitProvidersConfig = {}
  for (const name of ['github', 'gitlab', 'bitbucket'] as const) {
    const provider = gitProvider(env, name, publicUrl)
    if (provider) gitProviders[name] = provider
  }
  return {
    publicUrl,
    gitProviders,
    chatProvider: chatProvider(env, publicUrl),
    mailProvider: mailProvider(env, publicUrl),
    bankProvider: defined({
      apiBaseUrl: url(env, 'BERTH_BANK_API_URL'),
      timeoutMs: milliseconds(env, 'BERTH_BANK_TIMEOUT_MS'),
      clientCertificate: bankCertificate(env),
    }),
    messenger: defined({
      apiBaseUrl: url(env, 'BERTH_MESSENGER_API_URL'),
      timeoutMs: milliseconds(env, 'BERTH_MESSENGER_TIMEOUT_MS'),
      publicUrl,
    }),
  }
}
