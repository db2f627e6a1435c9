import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A key and its self-signed certificate, PEM. */
export interface SelfSignedCert {
  key: string
  cert: string
}

/**
 * A self-signed certificate (ECDSA P-256, one day) for the given IP addresses and DNS
 * names, made with the `openssl` CLI. Clients trust it by taking `cert` as their CA
 * (`GIT_SSL_CAINFO`, `http.sslCAInfo`, `ca:` in Node).
 *
 * @example
 * ```ts
 * const { key, cert } = selfSignedCert({ ips: ['127.0.0.1'], dns: ['localhost'] })
 * https.createServer({ key, cert }, handler)
 * ```
 */
export function selfSignedCert(names: { ips?: string[]; dns?: string[] }): SelfSignedCert {
  const san = [...(names.ips ?? []).map((ip) => `IP:${ip}`), ...(names.dns ?? []).map((d) => `DNS:${d}`)].join(',')
  if (!san) throw new Error('selfSignedCert: give at least one IP or DNS name')
  const dir = mkdtempSync(join(tmpdir(), 'berth-cert-'))
  try {
    const run = spawnSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=berth-fake-git',
        '-addext',
        `subjectAltName=${san}`,
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { encoding: 'utf8' },
    )
    if (run.status !== 0) throw new Error(`openssl failed: ${run.error?.message ?? run.stderr}`)
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
