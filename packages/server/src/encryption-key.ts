import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * The 32-byte key that encrypts secrets at rest: from `configured` (base64 or hex of 32
 * bytes) when given, else read from `<dataDir>/encryption.key`, generated there (mode 0600)
 * on first start.
 *
 * @example
 * ```ts
 * const key = loadEncryptionKey({ dataDir: './.data' })
 * ```
 */
export function loadEncryptionKey(opts: { configured?: string | undefined; dataDir: string }): Uint8Array {
  if (opts.configured) return decodeKey(opts.configured)
  const file = join(opts.dataDir, 'encryption.key')
  try {
    return decodeKey(readFileSync(file, 'utf8').trim())
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  mkdirSync(opts.dataDir, { recursive: true })
  const key = randomBytes(32)
  try {
    writeFileSync(file, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' })
  } catch (err) {
    // Another process created it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return decodeKey(readFileSync(file, 'utf8').trim())
    throw err
  }
  return key
}

function decodeKey(text: string): Uint8Array {
  const key = /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64')
  if (key.length !== 32) throw new Error('BERTH_ENCRYPTION_KEY must be 32 bytes, base64 or hex encoded')
  return key
}
