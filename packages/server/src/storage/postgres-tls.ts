import { readFileSync } from 'node:fs'
import type { ConnectionOptions } from 'node:tls'

/**
 * The TLS options for a `postgres://` URL and an optional private CA file, the way libpq
 * reads `sslmode`: `require` encrypts without checking the certificate (with a CA file it
 * checks the chain, as libpq does when a root certificate is given), `verify-ca` checks the
 * chain, `verify-full` the chain and the host name. Without a CA file the URL's own
 * `sslmode` is left to the client (system CAs). Returns undefined when there is nothing to add.
 */
export function postgresTls(url: string, caFile: string | undefined): ConnectionOptions | undefined {
  if (!caFile) return undefined
  const mode = new URL(url).searchParams.get('sslmode') ?? 'verify-full'
  if (mode === 'disable' || mode === 'allow' || mode === 'prefer')
    throw new Error(`a CA file is set, but the URL's sslmode=${mode} would not check the server with it`)
  let ca: Buffer
  try {
    ca = readFileSync(caFile)
  } catch (err) {
    throw new Error(`the CA file ${caFile} cannot be read: ${(err as Error).message}`)
  }
  return mode === 'verify-full'
    ? { ca, rejectUnauthorized: true }
    : { ca, rejectUnauthorized: true, checkServerIdentity: () => undefined }
}
