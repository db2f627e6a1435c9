import { defineRuntime } from '@berth/core'
import { connectEngine, type EngineConnectionOptions } from './connection.js'
import { createEngineRuntime } from './engine-runtime.js'
import type { DiskOptions } from '@berth/core'
import type { HardeningOptions } from './hardening.js'

/** Options of {@link dockerRuntime}: where the engine is, and how containers are locked down. */
export interface DockerRuntimeOptions extends EngineConnectionOptions {
  hardening?: HardeningOptions
  /** How often a running exec checks that its container is alive (default 1000 ms). */
  watchIntervalMs?: number
  /** `ensureImage` gives up a pull after this long without progress (default 15 s). */
  pullIdleTimeoutMs?: number
  /** Where size-limited workspaces are made (an engine on this machine, as root); without it `limits.diskBytes` is not enforced. */
  disks?: DiskOptions
}

/**
 * The Docker runtime: Berth's {@link ContainerRuntime} on the Docker Engine API (dockerode)
 * over a unix socket or TCP/TLS. Containers are hardened by default (see `toCreateOptions`).
 *
 * @example
 * ```ts
 * const rt = dockerRuntime({ socketPath: '/var/run/docker.sock' })
 * const { id } = await rt.create({ image: 'node:20', cmd: ['sleep', 'infinity'], labels: { 'berth.owner': 'usr_1' } })
 * await rt.start(id)
 * ```
 */
export const dockerRuntime = defineRuntime((options: DockerRuntimeOptions = {}) => {
  const { docker, endpoint } = connectEngine(options)
  return createEngineRuntime({
    name: 'docker',
    docker,
    endpoint,
    hardening: options.hardening,
    watchIntervalMs: options.watchIntervalMs,
    pullIdleTimeoutMs: options.pullIdleTimeoutMs,
    disks: options.disks,
  })
})
