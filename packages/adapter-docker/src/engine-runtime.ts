import { randomBytes } from 'node:crypto'
import type { Readable } from 'node:stream'
import {
  MANAGED_LABEL,
  type ContainerRuntime,
  type ContainerSpec,
  type ListFilter,
} from '@berth/core'
import type Docker from 'dockerode'
import { getArchive, putArchive } from './archive.js'
import type { EngineContext } from './context.js'
import { statusOf, toContainerError } from './errors.js'
import { startExec } from './exec.js'
import { toCreateOptions, type HardeningOptions } from './hardening.js'
import { imageProvisioner } from './images.js'
import { toContainerInfo, toContainerStats, toContainerSummary } from './inspect.js'

/** Everything an Engine-API runtime is built from; Docker and Podman differ only in these. */
export interface EngineRuntimeOptions {
  /** Runtime name: `docker`, `podman`. */
  name: string
  docker: Docker
  /** The engine's address, for messages. */
  endpoint: string
  hardening?: HardeningOptions
  /** How often a running exec checks its container is alive (default 1000 ms). */
  watchIntervalMs?: number
  /** Rewrite an image reference before create (Podman qualifies local short names). */
  resolveImage?: (image: string) => Promise<string>
  /** The name an image built by `ensureImage` gets (Podman: `localhost/<name>`); default unchanged. */
  localImageName?: (image: string) => string
  /** `ensureImage` gives up a pull after this long without progress (default 15 s). */
  pullIdleTimeoutMs?: number
  /** Rewrite `getArchive`'s tar stream (Podman names directories without the trailing slash). */
  transformArchive?: (tar: Readable) => AsyncIterable<Uint8Array>
  /** Check that `putArchive`'s target exists first (Podman creates missing directories; Docker answers 404). */
  verifyPutPath?: boolean
}

/**
 * A generated container name: `berth-` and 12 hex digits.
 *
 * @example
 * ```ts
 * containerName() // 'berth-3f9a0c12ab34'
 * ```
 */
export function containerName(): string {
  return `berth-${randomBytes(6).toString('hex')}`
}

function labelFilters(filter: ListFilter = {}): string[] {
  const out = [`${MANAGED_LABEL}=true`]
  for (const [k, v] of Object.entries(filter.labels ?? {})) out.push(v === true ? k : `${k}=${v}`)
  return out
}

/**
 * The {@link ContainerRuntime} over a Docker Engine API client. `dockerRuntime` and
 * `podmanRuntime` are this with their connection and quirks filled in.
 *
 * @example
 * ```ts
 * const rt = createEngineRuntime({ name: 'docker', docker: new Docker(), endpoint: 'unix:///var/run/docker.sock' })
 * ```
 */
export function createEngineRuntime(options: EngineRuntimeOptions): ContainerRuntime {
  const { docker, name, endpoint } = options
  const ctx: EngineContext = {
    name,
    docker,
    endpoint,
    watchIntervalMs: options.watchIntervalMs ?? 1000,
    error: (err, op, extra) => toContainerError(err, { runtime: name, op, endpoint, ...extra }),
  }
  const container = (id: string) => docker.getContainer(id)

  return {
    name,
    capabilities: { isolation: true, limits: true },

    async ping() {
      try {
        await docker.ping()
      } catch (err) {
        throw ctx.error(err, 'ping')
      }
    },

    async create(spec: ContainerSpec) {
      const containerNameValue = spec.name ?? containerName()
      let image = spec.image
      try {
        if (options.resolveImage) image = await options.resolveImage(spec.image)
        const created = await docker.createContainer(
          toCreateOptions({ ...spec, image }, containerNameValue, options.hardening),
        )
        return { id: created.id, name: containerNameValue }
      } catch (err) {
        throw ctx.error(err, 'create', { image, name: containerNameValue })
      }
    },

    async start(id) {
      try {
        await container(id).start()
      } catch (err) {
        if (statusOf(err) === 304) return // already running
        throw ctx.error(err, 'start', { id })
      }
    },

    async stop(id, opts = {}) {
      try {
        await container(id).stop({ t: opts.timeoutSeconds ?? 10 })
      } catch (err) {
        if (statusOf(err) === 304) return // already stopped
        throw ctx.error(err, 'stop', { id })
      }
    },

    async remove(id) {
      try {
        await container(id).remove({ force: true, v: true })
      } catch (err) {
        const status = statusOf(err)
        if (status === 404) return // already gone
        if (status === 409 && /already in progress/i.test(String((err as Error).message))) return
        throw ctx.error(err, 'remove', { id })
      }
    },

    async removeVolume(name) {
      try {
        await docker.getVolume(name).remove({ force: true })
      } catch (err) {
        if (statusOf(err) === 404) return // already gone
        throw ctx.error(err, 'removeVolume', { volume: name })
      }
    },

    exec: (id, opts) => startExec(ctx, id, opts),

    ensureImage: imageProvisioner(ctx, { localName: options.localImageName, pullIdleTimeoutMs: options.pullIdleTimeoutMs }),

    putArchive: (id, path, tar) => putArchive(ctx, id, path, tar, { verifyPath: options.verifyPutPath }),

    getArchive: (id, path) => getArchive(ctx, id, path, options.transformArchive),

    async list(filter) {
      try {
        const items = await docker.listContainers({
          all: filter?.all ?? true,
          filters: { label: labelFilters(filter) },
        })
        return items.map(toContainerSummary)
      } catch (err) {
        throw ctx.error(err, 'list')
      }
    },

    async inspect(id) {
      try {
        return toContainerInfo(await container(id).inspect())
      } catch (err) {
        throw ctx.error(err, 'inspect', { id })
      }
    },

    async stats(id) {
      try {
        const raw = await container(id).stats({ stream: false, 'one-shot': true } as { stream: false })
        return toContainerStats(raw)
      } catch (err) {
        throw ctx.error(err, 'stats', { id })
      }
    },

    async close() {
      // dockerode keeps no pooled connections by default; nothing to release.
    },
  }
}
