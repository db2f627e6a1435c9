import Docker from 'dockerode'

/** How to reach a Docker Engine API. With none of these set, `DOCKER_HOST` (and `DOCKER_TLS_VERIFY`/`DOCKER_CERT_PATH`) or `/var/run/docker.sock`. */
export interface EngineConnectionOptions {
  /** A ready dockerode client; the other connection fields are then ignored. */
  docker?: Docker
  /** Unix socket path, e.g. `/var/run/docker.sock`. */
  socketPath?: string
  /** TCP host of a remote engine. */
  host?: string
  port?: number | string
  /** `https` for a TLS-protected engine (then `ca`, `cert`, `key`); `ssh` for `ssh://user@host` (the engine host runs `docker system dial-stdio`). */
  protocol?: 'http' | 'https' | 'ssh'
  ca?: string | Buffer
  cert?: string | Buffer
  key?: string | Buffer
  /** The SSH user (`protocol: 'ssh'`). */
  username?: string
  /** ssh2 connect options (`protocol: 'ssh'`), e.g. `{ agent: process.env.SSH_AUTH_SOCK }`. */
  sshOptions?: Record<string, unknown>
}

/** The modem fields that locate the engine. */
interface ModemLike {
  socketPath?: string | (() => string)
  host?: string
  port?: number | string
  protocol?: string
  username?: string
}

/**
 * A dockerode client for the options, and the engine's address for messages.
 *
 * @example
 * ```ts
 * const { docker, endpoint } = connectEngine({ socketPath: '/run/podman/podman.sock' })
 * endpoint // 'unix:///run/podman/podman.sock'
 * ```
 */
export function connectEngine(opts: EngineConnectionOptions = {}): { docker: Docker; endpoint: string } {
  let docker: Docker
  if (opts.docker) docker = opts.docker
  else if (opts.socketPath) docker = new Docker({ socketPath: opts.socketPath })
  else if (opts.host)
    docker = new Docker({
      host: opts.host,
      port: opts.port,
      protocol: opts.protocol ?? (opts.cert ? 'https' : 'http'),
      ca: opts.ca,
      cert: opts.cert,
      key: opts.key,
      ...(opts.protocol === 'ssh' && { username: opts.username, sshOptions: opts.sshOptions }),
    } as Docker.DockerOptions)
  else docker = new Docker()
  return { docker, endpoint: describeEndpoint(docker) }
}

/**
 * A dockerode client's engine address as a URL-ish string.
 *
 * @example
 * ```ts
 * describeEndpoint(new Docker({ socketPath: '/var/run/docker.sock' })) // 'unix:///var/run/docker.sock'
 * ```
 */
export function describeEndpoint(docker: Docker): string {
  const m = docker.modem as unknown as ModemLike
  if (m.socketPath) return `unix://${typeof m.socketPath === 'function' ? m.socketPath() : m.socketPath}`
  const user = m.protocol === 'ssh' && m.username ? `${m.username}@` : ''
  return `${m.protocol ?? 'http'}://${user}${m.host ?? 'localhost'}${m.port ? `:${m.port}` : ''}`
}
