import { dirname, join } from 'node:path'
import { createEngineRuntime, connectEngine, type DockerRuntimeOptions } from '@berth/adapter-docker'
import { defineRuntime } from '@berth/core'
import { slashDirectoryNames } from './archive-names.js'
import { discoverPodman } from './discovery.js'
import { localImageName, podmanImageResolver } from './image-names.js'

/** Options of {@link podmanRuntime}; with no connection given, the socket is discovered. */
export interface PodmanRuntimeOptions extends DockerRuntimeOptions {
  /**
   * The API service that creates containers under gVisor (`podman --runtime runsc system
   * service`, started by scripts/gvisor/ensure.sh): Podman 4 ignores the create's runtime
   * field. Default: `podman-gvisor.sock` beside a unix socket.
   */
  gvisorSocketPath?: string
}

/**
 * The Podman runtime: Berth's {@link ContainerRuntime} on Podman's Docker-compatible API,
 * rootful or rootless, built on `@berth/adapter-docker` (same hardening, same exec and
 * archive code) plus Podman's ways: socket discovery (`discoverPodman`), local images
 * under `localhost/` (where `ensureImage` also tags what it builds), archive directory entries named like Docker's (`dir/`), and a
 * missing `putArchive` target reported as missing (Podman would create it).
 *
 * @example
 * ```ts
 * const rt = podmanRuntime() // CONTAINER_HOST, /run/podman/podman.sock or $XDG_RUNTIME_DIR/podman/podman.sock
 * const { id } = await rt.create({ image: 'berth-test:latest', cmd: ['sleep', 'infinity'] })
 * ```
 */
export const podmanRuntime = defineRuntime((options: PodmanRuntimeOptions = {}) => {
  const explicit = options.docker || options.socketPath || options.host
  const connection = explicit ? options : discoverPodman().connection
  const { docker, endpoint } = connectEngine(connection)
  const gvisorSocketPath =
    options.gvisorSocketPath ?? (connection.socketPath && join(dirname(connection.socketPath), 'podman-gvisor.sock'))
  return createEngineRuntime({
    name: 'podman',
    docker,
    endpoint,
    hardening: options.hardening,
    watchIntervalMs: options.watchIntervalMs,
    pullIdleTimeoutMs: options.pullIdleTimeoutMs,
    disks: options.disks,
    resolveImage: podmanImageResolver(docker),
    localImageName,
    transformArchive: slashDirectoryNames,
    verifyPutPath: true,
    gvisorArchiveByExec: true,
    // Namespaces are made on this machine, as root: a local engine's only.
    gvisorLoopbackNetns: process.getuid?.() === 0 && Boolean(connection.socketPath),
    ...(gvisorSocketPath && { gvisorDocker: connectEngine({ socketPath: gvisorSocketPath }).docker }),
  })
})
