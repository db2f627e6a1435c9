/** Prefixes of every identifier kind (API.md "Conventions"). */
export const ID_PREFIX = {
  task: 'task',
  workspace: 'ws',
  profile: 'prof',
  playbook: 'pb',
  run: 'run',
  integration: 'int',
  memory: 'mem',
  secret: 'sec',
  tool: 'tool',
  skill: 'skill',
  agent: 'agent',
  gitAccount: 'git',
  apiKey: 'key',
  user: 'usr',
  callerKey: 'ck',
  container: 'ctr',
  session: 'sess',
  delivery: 'dlv',
  notification: 'ntf',
  environment: 'env',
  approval: 'apr',
  audit: 'aud',
  preview: 'prv',
} as const

export type IdKind = keyof typeof ID_PREFIX

const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyz'

/**
 * Random lowercase base-36 text of `length` characters from a CSPRNG (no modulo bias).
 *
 * @example
 * ```ts
 * randomToken(24) // 'k3j9x0...'
 * ```
 */
export function randomToken(length: number): string {
  let out = ''
  while (out.length < length) {
    const byte = randomByte()
    // 252 = 7 * 36: drop bytes above it so each character is uniform.
    if (byte < 252) out += ALPHABET[byte % 36]
  }
  return out
}

// Random bytes are drawn from the CSPRNG a block at a time and each used once: a call per
// token (every request id) cost more than the rest of making the token.
const pool = new Uint8Array(1024)
let poolAt = pool.length

function randomByte(): number {
  if (poolAt === pool.length) {
    // Web Crypto: works in Node >= 20 and browsers, so the route table stays importable anywhere.
    globalThis.crypto.getRandomValues(pool)
    poolAt = 0
  }
  return pool[poolAt++]!
}

let lastMs = 0
let sequence = 0

/**
 * A new prefixed identifier, e.g. `prof_0mhx3k2a9f3k2m...`: 20 lowercase base-36
 * characters, the first 9 the creation time in milliseconds, the next 2 a sequence within
 * that millisecond (so ids of one process sort by creation, and newest-first lists and
 * storage indexes stay append-only), the other 9 random.
 *
 * @example
 * ```ts
 * newId('profile') // 'prof_0mhx3k2a9c9x...'
 * ```
 */
export function newId(kind: IdKind): string {
  const now = Date.now()
  sequence = now === lastMs ? (sequence + 1) % 1296 : 0
  lastMs = now
  return `${ID_PREFIX[kind]}_${now.toString(36).padStart(9, '0').slice(-9)}${sequence.toString(36).padStart(2, '0')}${randomToken(9)}`
}

/** Pattern an identifier of `kind` must match (used by the schemas). */
export function idPattern(kind: IdKind): RegExp {
  return new RegExp(`^${ID_PREFIX[kind]}_[a-z0-9]{1,64}$`)
}
