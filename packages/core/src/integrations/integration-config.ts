import * as v from 'valibot'
import {
  type ValidationIssue,
  EmailConfig,
  SECRET_CONFIG_FIELDS,
  SECRET_MASK,
  WebhookConfig,
  ChatProviderConfig,
  CONNECT_MANAGED_FIELDS,
  MailProviderConfig,
  BANK_MANAGED_FIELDS,
  MESSENGER_MANAGED_FIELDS,
} from '@berth/contract'
import { toIssues } from '../internal/input.js'
import type { Cipher } from '../ports/cipher.js'

type Config = Record<string, unknown>

const SECRET_FIELDS: ReadonlySet<string> = new Set(SECRET_CONFIG_FIELDS)
/** Configs are small documents; deeper nesting is refused before anything walks it. */
const MAX_DEPTH = 8

/** The shape each directly created type's config must have. */
const CONFIG_SCHEMAS: Record<string, v.GenericSchema> = {
  webhook: WebhookConfig,
  email: EmailConfig,
  chatprovider: ChatProviderConfig,
  mailprovider: MailProviderConfig,
}

/** Config fields a connect flow owns, by type (a PATCH cannot change them). */
const MANAGED_FIELDS: Record<string, readonly string[]> = {
  ...CONNECT_MANAGED_FIELDS,
  bankprovider: BANK_MANAGED_FIELDS,
  messenger: MESSENGER_MANAGED_FIELDS,
}

/** Apply `fn` to every secret field (at any depth); everything else is copied as is. */
function mapSecrets(value: unknown, fn: (secret: unknown) => unknown): unknown {
  if (Array.isArray(value)) return value.map((x) => mapSecrets(x, fn))
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, x]) => [k, SECRET_FIELDS.has(k) ? fn(x) : mapSecrets(x, fn)]),
    )
  }
  return value
}

/** Nesting depth of a JSON value, without recursion (a hostile body may be deep). */
function depthOf(value: unknown): number {
  let max = 0
  const stack: Array<[unknown, number]> = [[value, 0]]
  while (stack.length) {
    const [x, d] = stack.pop()!
    max = Math.max(max, d)
    if (d > MAX_DEPTH) return d
    if (x !== null && typeof x === 'object') for (const child of Object.values(x)) stack.push([child, d + 1])
  }
  return max
}

/**
 * An issue when a config nests deeper than any real one does; check this before anything
 * else walks the config.
 *
 * @example
 * ```ts
 * depthIssues({ a: { b: 1 } }) // []
 * ```
 */
export function depthIssues(config: Config): ValidationIssue[] {
  return depthOf(config) > MAX_DEPTH
    ? [{ location: 'body', path: 'config', message: `nested deeper than ${MAX_DEPTH} levels` }]
    : []
}

/**
 * Problems of a config for its type: its shape (webhook and email), and for every type
 * that secret fields are strings. Issue paths start with `config.`.
 *
 * @example
 * ```ts
 * configIssues('webhook', { url: 'ftp://x' }) // [{ location: 'body', path: 'config.url', ... }]
 * ```
 */
export function configIssues(type: string, config: Config): ValidationIssue[] {
  const deep = depthIssues(config)
  if (deep.length) return deep
  const issues: ValidationIssue[] = []
  const schema = CONFIG_SCHEMAS[type]
  if (schema) {
    const parsed = v.safeParse(schema, config)
    if (!parsed.success)
      issues.push(
        ...toIssues('body', parsed.issues).map((i) => ({ ...i, path: i.path ? `config.${i.path}` : 'config' })),
      )
  }
  const walk = (value: unknown, path: string) => {
    if (value === null || typeof value !== 'object') return
    for (const [k, x] of Object.entries(value)) {
      const at = `${path}.${k}`
      if (SECRET_FIELDS.has(k) && typeof x !== 'string')
        issues.push({ location: 'body', path: at, message: 'must be a string' })
      else walk(x, at)
    }
  }
  if (!schema) walk(config, 'config')
  return issues
}

/**
 * The config as responses show it: every secret field reads `••••••••`.
 *
 * @example
 * ```ts
 * maskConfig({ url: 'https://x', secret: 'enc:v1:...' }) // { url: 'https://x', secret: '••••••••' }
 * ```
 */
export function maskConfig(config: Config): Config {
  return mapSecrets(config, (x) => (x === null || x === undefined ? x : SECRET_MASK)) as Config
}

/**
 * The config as stored: secret fields encrypted.
 *
 * @example
 * ```ts
 * const stored = sealConfig({ url, secret: 'whsec' }, cipher) // secret: 'enc:v1:...'
 * ```
 */
export function sealConfig(config: Config, cipher: Cipher): Config {
  return mapSecrets(config, (x) => (typeof x === 'string' ? cipher.encrypt(x) : x)) as Config
}

/**
 * A stored config with its secret fields decrypted (for delivery, never for a response).
 *
 * @example
 * ```ts
 * openConfig(stored, cipher).secret // 'whsec'
 * ```
 */
export function openConfig(config: Config, cipher: Cipher): Config {
  return mapSecrets(config, (x) => (typeof x === 'string' ? cipher.decrypt(x) : x)) as Config
}

/**
 * Replace every `••••••••` a caller sent back for a secret field with the value stored at
 * the same place; a mask where nothing is stored is an issue (there is nothing to keep).
 *
 * @example
 * ```ts
 * restoreMasks({ url, secret: '••••••••' }, { url: old, secret: 'whsec' }) // { config: { url, secret: 'whsec' }, issues: [] }
 * ```
 */
export function restoreMasks(input: Config, stored: Config | undefined): { config: Config; issues: ValidationIssue[] } {
  const issues: ValidationIssue[] = []
  const walk = (value: unknown, old: unknown, path: string): unknown => {
    if (Array.isArray(value))
      return value.map((x, i) => walk(x, Array.isArray(old) ? old[i] : undefined, `${path}.${i}`))
    if (value === null || typeof value !== 'object') return value
    const prev = old !== null && typeof old === 'object' && !Array.isArray(old) ? (old as Config) : undefined
    return Object.fromEntries(
      Object.entries(value).map(([k, x]) => {
        const at = `${path}.${k}`
        if (SECRET_FIELDS.has(k) && x === SECRET_MASK) {
          const kept = prev && Object.hasOwn(prev, k) ? prev[k] : undefined
          if (typeof kept !== 'string')
            issues.push({
              location: 'body',
              path: at,
              message: `${SECRET_MASK} keeps a stored value, but none is stored here: send the value`,
            })
          return [k, kept]
        }
        return [k, walk(x, prev?.[k], at)]
      }),
    )
  }
  return { config: walk(input, stored, 'config') as Config, issues }
}

/**
 * The config with the fields its connect flow owns (account, tokens, expiry) taken from the
 * stored config, whatever was sent: a PATCH of an OAuth-connected integration changes only
 * what is the caller's to choose (e.g. `channel`, `recipients`). Other types: unchanged.
 *
 * @example
 * ```ts
 * keepManaged('chatprovider', { channel: '#ops' }, stored) // { channel: '#ops', team_id: 'T1', access_token: '…', ... }
 * ```
 */
export function keepManaged(type: string, config: Config, stored: Config): Config {
  const managed = Object.hasOwn(MANAGED_FIELDS, type) ? MANAGED_FIELDS[type]! : []
  if (managed.length === 0) return config
  const out: Config = Object.fromEntries(Object.entries(config).filter(([k]) => !managed.includes(k)))
  for (const k of managed) if (Object.hasOwn(stored, k)) out[k] = stored[k]
  return out
}
