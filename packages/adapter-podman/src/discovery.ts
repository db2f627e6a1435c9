import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { EngineConnectionOptions } from '@berth/adapter-docker'

/** Where the Podman API was found, and why. */
export interface PodmanEndpoint {
  connection: Pick<EngineConnectionOptions, 'socketPath' | 'host' | 'port' | 'protocol'>
  /** `CONTAINER_HOST`, `rootful`, `rootless`, `DOCKER_HOST`: which rule picked it. */
  source: string
}

/** The rootful Podman API socket (`podman system service` as root, or `podman.socket`). */
export const ROOTFUL_SOCKET = '/run/podman/podman.sock'

/** What discovery looks at; injectable for tests. */
export interface DiscoveryEnv {
  env?: NodeJS.ProcessEnv
  uid?: number
  exists?: (path: string) => boolean
}

/**
 * A `unix://`, `tcp://` or `http(s)://` engine URL as connection options; `null` for other schemes (ssh).
 *
 * @example
 * ```ts
 * parseEngineUrl('unix:///run/podman/podman.sock') // { socketPath: '/run/podman/podman.sock' }
 * parseEngineUrl('tcp://10.0.0.5:8888')            // { host: '10.0.0.5', port: 8888, protocol: 'http' }
 * ```
 */
export function parseEngineUrl(url: string): PodmanEndpoint['connection'] | null {
  if (url.startsWith('unix://')) return { socketPath: url.slice('unix://'.length) }
  if (url.startsWith('/')) return { socketPath: url }
  const m = /^(tcp|http|https):\/\/([^:/]+)(?::(\d+))?/.exec(url)
  if (!m) return null
  return { host: m[2]!, port: m[3] ? Number(m[3]) : 2375, protocol: m[1] === 'https' ? 'https' : 'http' }
}

/**
 * Find the Podman API, first match wins:
 * 1. `CONTAINER_HOST` (Podman's own variable: `unix://…` or `tcp://…`);
 * 2. as root, the rootful socket `/run/podman/podman.sock`;
 * 3. the rootless socket `$XDG_RUNTIME_DIR/podman/podman.sock` (else `/run/user/<uid>/podman/podman.sock`);
 * 4. as non-root, the rootful socket if it exists (group access);
 * 5. `DOCKER_HOST` when it names a Podman socket (podman-docker setups).
 * Sockets must exist to match; when none does, the first candidate is returned so the
 * runtime's errors name the path it tried.
 *
 * @example
 * ```ts
 * discoverPodman({ env: { XDG_RUNTIME_DIR: '/run/user/1000' }, uid: 1000, exists: () => true })
 * // { connection: { socketPath: '/run/user/1000/podman/podman.sock' }, source: 'rootless' }
 * ```
 */
export function discoverPodman(probe: DiscoveryEnv = {}): PodmanEndpoint {
  const env = probe.env ?? process.env
  const uid = probe.uid ?? process.getuid?.() ?? 0
  const exists = probe.exists ?? existsSync
  if (env.CONTAINER_HOST) {
    const connection = parseEngineUrl(env.CONTAINER_HOST)
    if (connection) return { connection, source: 'CONTAINER_HOST' }
  }
  const runtimeDir = env.XDG_RUNTIME_DIR || `/run/user/${uid}`
  const rootless = join(runtimeDir, 'podman', 'podman.sock')
  const candidates: PodmanEndpoint[] =
    uid === 0
      ? [{ connection: { socketPath: ROOTFUL_SOCKET }, source: 'rootful' }]
      : [
          { connection: { socketPath: rootless }, source: 'rootless' },
          { connection: { socketPath: ROOTFUL_SOCKET }, source: 'rootful' },
        ]
  if (env.DOCKER_HOST && /podman/.test(env.DOCKER_HOST)) {
    const connection = parseEngineUrl(env.DOCKER_HOST)
    if (connection) candidates.push({ connection, source: 'DOCKER_HOST' })
  }
  const found = candidates.find((c) => !c.connection.socketPath || exists(c.connection.socketPath))
  return found ?? candidates[0]!
}
