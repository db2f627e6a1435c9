import { readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import type { EngineConnectionOptions } from './connection.js'

/** The variables the docker CLI reads next to `DOCKER_HOST`, as {@link engineUrlOptions} reads them. */
export interface EngineUrlEnv {
  /** Any value but `''` or `0`: talk TLS and verify the engine (`DOCKER_TLS_VERIFY`). */
  DOCKER_TLS_VERIFY?: string
  /** Directory with `ca.pem`, `cert.pem`, `key.pem` (default `~/.docker`). */
  DOCKER_CERT_PATH?: string
  /** The ssh-agent socket used for `ssh://` engines. */
  SSH_AUTH_SOCK?: string
}

const SCHEMES = 'unix:///path, tcp://host:port, http(s)://host:port or ssh://user@host[:port]'

function readPem(dir: string, name: string): Buffer {
  try {
    return readFileSync(join(dir, name))
  } catch (err) {
    throw new Error(
      `engine TLS: cannot read ${join(dir, name)} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    )
  }
}

/**
 * Connection options for an engine URL, read the way the docker and podman CLIs read
 * `DOCKER_HOST` / `CONTAINER_HOST`: `unix:///path` (or a bare path) is a socket;
 * `tcp://host[:port]` is plain HTTP on 2375, or TLS on 2376 when `DOCKER_TLS_VERIFY` is set
 * or the port is 2376, with `ca.pem`/`cert.pem`/`key.pem` from `DOCKER_CERT_PATH`
 * (default `~/.docker`); `https://` forces TLS; `ssh://user@host[:port]` goes over SSH
 * (authenticated by the agent at `SSH_AUTH_SOCK`; the remote host runs
 * `docker system dial-stdio`; the host key is not checked against `known_hosts`).
 * Throws a clear message for anything else.
 *
 * @example
 * ```ts
 * engineUrlOptions('tcp://10.0.0.5:2375')   // { host: '10.0.0.5', port: 2375, protocol: 'http' }
 * engineUrlOptions('ssh://ops@build-02')    // { host: 'build-02', port: 22, protocol: 'ssh', username: 'ops', sshOptions: { agent: … } }
 * const { docker } = connectEngine(engineUrlOptions(process.env.BERTH_ENGINE_URL!, process.env))
 * ```
 */
export function engineUrlOptions(url: string, env: EngineUrlEnv = {}): EngineConnectionOptions {
  if (url.startsWith('/')) return { socketPath: url }
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new Error(`engine URL "${url}" is not a URL; expected ${SCHEMES}`)
  }
  const scheme = parsed.protocol.slice(0, -1)
  if (scheme === 'unix') {
    if (!parsed.pathname || parsed.pathname === '/') throw new Error(`engine URL "${url}" names no socket path`)
    return { socketPath: decodeURIComponent(parsed.pathname) }
  }
  if (!['tcp', 'http', 'https', 'ssh'].includes(scheme))
    throw new Error(`engine URL "${url}": unsupported scheme "${scheme}"; expected ${SCHEMES}`)
  if (!parsed.hostname) throw new Error(`engine URL "${url}" names no host; expected ${SCHEMES}`)
  // IPv6 literals come bracketed from URL; the HTTP client wants them bare.
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1')
  // From the text: URL drops a scheme's default port (`https://h:443` would read as no port).
  const explicitPort = /^[a-z]+:\/\/(?:[^@/]*@)?(?:\[[^\]]*\]|[^:/]*):(\d+)/i.exec(url)?.[1]
  if (scheme === 'ssh') {
    return {
      host,
      port: explicitPort ? Number(explicitPort) : 22,
      protocol: 'ssh',
      ...(parsed.username && { username: decodeURIComponent(parsed.username) }),
      sshOptions: { ...(env.SSH_AUTH_SOCK && { agent: env.SSH_AUTH_SOCK }) },
    }
  }
  const verify = env.DOCKER_TLS_VERIFY !== undefined && env.DOCKER_TLS_VERIFY !== '' && env.DOCKER_TLS_VERIFY !== '0'
  const tls = scheme === 'https' || (scheme === 'tcp' && (verify || explicitPort === '2376'))
  const port = explicitPort ? Number(explicitPort) : tls ? 2376 : 2375
  if (!tls) return { host, port, protocol: 'http' }
  const dir = env.DOCKER_CERT_PATH || join(homedir(), '.docker')
  // Without DOCKER_TLS_VERIFY or a cert path, https:// still works with a publicly trusted engine certificate.
  if (!verify && !env.DOCKER_CERT_PATH) return { host, port, protocol: 'https' }
  return {
    host,
    port,
    protocol: 'https',
    ca: readPem(dir, 'ca.pem'),
    cert: readPem(dir, 'cert.pem'),
    key: readPem(dir, 'key.pem'),
  }
}
