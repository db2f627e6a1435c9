import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'

/** Encrypts values at rest (secret values, model keys, OAuth tokens). */
export interface Cipher {
  encrypt(plaintext: string): string
  decrypt(ciphertext: string): string
}

const VERSION = 'enc:v1'

/**
 * AES-256-GCM with a 32-byte key. Output: `enc:v1:<iv>:<tag>:<ciphertext>` (base64url),
 * a fresh 12-byte IV per value, so equal plaintexts never look equal on disk.
 *
 * @example
 * ```ts
 * const cipher = createAesGcmCipher(randomBytes(32))
 * cipher.decrypt(cipher.encrypt('sk-123')) // 'sk-123'
 * ```
 */
export function createAesGcmCipher(key: Uint8Array): Cipher {
  if (key.length !== 32) throw new Error(`encryption key must be 32 bytes, got ${key.length}`)
  const k = Buffer.from(key)
  return {
    encrypt(plaintext) {
      const iv = randomBytes(12)
      const c = createCipheriv('aes-256-gcm', k, iv)
      const body = Buffer.concat([c.update(plaintext, 'utf8'), c.final()])
      return [VERSION, iv.toString('base64url'), c.getAuthTag().toString('base64url'), body.toString('base64url')].join(
        ':',
      )
    },
    decrypt(ciphertext) {
      const parts = ciphertext.split(':')
      if (parts.length !== 5 || `${parts[0]}:${parts[1]}` !== VERSION) throw new Error('not a Berth ciphertext')
      const d = createDecipheriv('aes-256-gcm', k, Buffer.from(parts[2]!, 'base64url'))
      d.setAuthTag(Buffer.from(parts[3]!, 'base64url'))
      return Buffer.concat([d.update(Buffer.from(parts[4]!, 'base64url')), d.final()]).toString('utf8')
    },
  }
}
