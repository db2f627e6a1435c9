import { randomBytes } from 'node:crypto'
import type { Readable } from 'node:stream'
import {
  ContainerError,
  DISK_LABEL,
  collectExec,
  execFileOperations,
  releaseDisk,
  workspaceDisks,
  type ContainerRuntime,
  type ContainerSpec,
  type DiskOptions,
} from '@berth/core'
import type Docker from 'dockerode'
import { getArchive, putArchive } from './archive.js'
import type { EngineContext } from './context.js'
import { statusOf, toContainerError } from './errors.js'
import { startExec } from './exec.js'
import { toCreateOptions, type HardeningOptions } from './hardening.js'
import { getArchiveByExec, putArchiveByExec, runsGvisor } from './exec-archive.js'
import { imageProvisioner } from './images.js'
import { egressEnforcer, EGRESS_LABEL } from './egress.js'
import { hostPathMapper } from './host-paths.js'
import { loopbackNetns, NETNS_LABEL, releaseNetns } from './loopback-netns.js'
import type { FirewallOptions } from './firewall.js'
import { toContainerInfo, toContainerStats, toContainerSummary } from './inspect.js'
import { engineVolumes, labelFilters } from './volumes.js'
import { assertIsolation, engineIsolations } from './isolation.js'

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
  /** The iptables binaries the egress policies' firewall rules are installed with (default `iptables`, `ip6tables`; needs root). */
  firewall?: FirewallOptions
  /** Where `limits.diskBytes` workspaces are made (see {@link DiskOptions}); without it the limit is not enforced. */
  disks?: DiskOptions
  /** Creates `isolation: 'gvisor'` specs (Podman 4's API ignores a create's runtime: a service run with `--runtime runsc`). */
  gvisorDocker?: Docker
  /** `none` under gVisor in a namespace of Berth's with loopback up (Podman leaves runsc's down; needs root). */
  gvisorLoopbackNetns?: boolean
  /** Archives of gVisor containers through `tar` in the container (Podman's archive endpoint cannot reach them). */
  gvisorArchiveByExec?: boolean
}

/** The label holding the user a container's commands run as. */
export const USER_LABEL = 'berth.user'

/**
 * The label of an image whose directory is already owned by the agent's user, as
 * `<uid:gid>@<dir>` (`1000:1000@/workspace`): a container made from it with that user and
 * working directory (nothing mounted there) needs no `chown` exec when it starts, which
 * is a whole runc exec per task. {@link hostImageRecipe} images carry it.
 */
export const WORKDIR_OWNER_LABEL = 'berth.workdir-owner'

/** True for a `user` that is not root (`1000`, `1000:1000`, `node`). */
function unprivileged(user: string | undefined): user is string {
  return user !== undefined && user !== '' && !/^(0|root)(:|$)/.test(user)
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
  const egress = egressEnforcer(ctx, options.firewall)
  // Berth in a container of this engine names bind sources as it sees them; the engine needs its host's paths.
  const hostMounts = hostPathMapper(docker)
  const disks = options.disks ? workspaceDisks(options.disks) : undefined
  const volumes = engineVolumes(ctx, disks, options.disks)
  /** What each container made here holds on the host: its disk (mount directory), its own network namespace. */
  const hostOf = new Map<string, { disk?: string; netns?: string }>()
  /** Read before the container goes: another runtime (a restarted server) knows them by the labels only. */
  const hostResources = async (id: string): Promise<{ disk?: string; netns?: string }> => {
    const known = hostOf.get(id)
    if (known !== undefined) return known
    const info = (await container(id)
      .inspect()
      .catch(() => null)) as { Config?: { Labels?: Record<string, string> | null } } | null
    const labels = info?.Config?.Labels ?? {}
    return { disk: labels[DISK_LABEL], netns: labels[NETNS_LABEL] }
  }
  const release = async (held: { disk?: string; netns?: string }) => {
    if (held.disk) await releaseDisk(held.disk)
    if (held.netns) await releaseNetns(held.netns)
  }
  /**
   * Containers whose commands run as a non-root user (`spec.user`, kept in the
   * {@link USER_LABEL} label too, so a restarted server finds it): their working directory
   * and the files put in are that user's. The main process (an idle init) stays root, so
   * Berth's own housekeeping can still chown; every exec defaults to the user, and a
   * non-root exec has no capabilities at all.
   */
  const owners = new Map<
    string,
    { user: string; workingDir: string | undefined; egress: boolean; ownedByUser?: boolean }
  >()
  const userOf = async (id: string): Promise<string | undefined> => {
    const own = owners.get(id)
    if (own) return own.user || undefined
    try {
      const info = (await container(id).inspect()) as {
        Config?: { Labels?: Record<string, string>; WorkingDir?: string }
      }
      const user = info.Config?.Labels?.[USER_LABEL] ?? ''
      owners.set(id, { user, workingDir: info.Config?.WorkingDir, egress: false })
      return user || undefined
    } catch {
      return undefined // the exec itself reports the missing container
    }
  }
  /**
   * Whether the image already gives the working directory to `user` ({@link WORKDIR_OWNER_LABEL},
   * read from the new container, whose labels include its image's), with nothing mounted over it.
   */
  const workdirOwnedBy = async (id: string, user: string, spec: ContainerSpec): Promise<boolean> => {
    const dir = spec.workingDir!
    if (spec.mounts?.some((m) => dir === m.target || dir.startsWith(`${m.target.replace(/\/$/, '')}/`))) return false
    const info = (await container(id).inspect()) as { Config?: { Labels?: Record<string, string> | null } }
    return info.Config?.Labels?.[WORKDIR_OWNER_LABEL] === `${user}@${dir}`
  }
  /** Run a short command as root (Berth's own housekeeping: never the agent's). */
  const asRoot = async (id: string, cmd: string[], op: string) => {
    const result = await collectExec(await startExec(ctx, id, { cmd, user: '0' }))
    if (result.exitCode !== 0)
      throw ctx.error(
        new Error(`${cmd.join(' ')} exited ${result.exitCode}: ${result.stderr.trim().slice(0, 300)}`),
        op,
        { id },
      )
  }
  const exec: ContainerRuntime['exec'] = async (id, opts) => {
    const user = opts.user ?? (await userOf(id))
    return startExec(ctx, id, { ...opts, user })
  }
  const byExec = async (id: string) => options.gvisorArchiveByExec === true && (await runsGvisor(docker, id))
  const fetchArchive: ContainerRuntime['getArchive'] = async (id, path) =>
    (await byExec(id)) ? getArchiveByExec(exec, id, path) : getArchive(ctx, id, path, options.transformArchive)
  const isolations = engineIsolations(ctx, options.hardening?.gvisorRuntime, options.gvisorDocker)

  return {
    name,
    capabilities: { isolation: true, limits: true, unprivilegedUser: true, egress: ['none', 'public', 'allowlist'] },

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
      // What this create made on the host: released when no container came of it.
      const held: { disk?: string; netns?: string } = {}
      let made = false
      let joining: string | undefined
      try {
        if (options.resolveImage) image = await options.resolveImage(spec.image)
        if (spec.isolation) await assertIsolation(ctx, spec.isolation, isolations)
        let network = spec.egress ? await egress.networkFor(spec.egress) : spec.network
        // Not swept until the container is made on it (or its create failed).
        joining = spec.egress && network !== 'none' ? network : undefined
        // Podman under gVisor: a `none` sandbox gets a namespace of Berth's, loopback up.
        const noNet = (network ?? options.hardening?.network) === 'none'
        const netns = options.gvisorLoopbackNetns && spec.isolation === 'gvisor' && noNet ? containerName() : undefined
        if (netns) {
          network = await loopbackNetns(netns)
          held.netns = netns
        }
        const user = unprivileged(spec.user) ? spec.user : undefined
        // A size-limited workspace, unless something (a session's volume) is mounted there.
        const dir = spec.workingDir
        const bytes = spec.limits?.diskBytes
        const sized = disks && bytes && dir && !spec.mounts?.some((m) => m.target === dir) ? disks : undefined
        // Named like a generated container (what `releaseDisk` accepts), whatever the spec's name.
        const own = sized && bytes ? await sized.make(containerName(), bytes) : undefined
        held.disk = own?.mount
        const bound = own && dir ? [{ type: 'bind' as const, source: own.source, target: dir }] : []
        const mounts = bound.length ? [...(spec.mounts ?? []), ...bound] : spec.mounts
        await volumes.remountDisks(spec.mounts)
        // With disks, a workspace on a mount (its disk, a session's volume) gets a read-only root:
        // overlay over ext4 cannot size the writable layer, so the writable paths are sized tmpfs.
        const readOnlyRoot = Boolean(disks && dir && mounts?.some((m) => m.target === dir))
        const labels = {
          ...spec.labels,
          ...(held.disk && { [DISK_LABEL]: held.disk }),
          ...(netns && { [NETNS_LABEL]: netns }),
          ...(spec.egress && { [EGRESS_LABEL]: spec.egress.policy }),
          ...(user && { [USER_LABEL]: user }),
        }
        // Berth in a container of this engine names bind sources as it sees them; the engine needs its host's paths.
        const engineMounts = await hostMounts(mounts ?? [])
        const creator = spec.isolation === 'gvisor' && options.gvisorDocker ? options.gvisorDocker : docker
        const createOn = (net: string | undefined) =>
          creator.createContainer(
            toCreateOptions(
              {
                ...spec,
                user: user ? undefined : spec.user,
                image,
                labels,
                mounts: engineMounts,
                ...(net !== undefined && { network: net }),
              },
              containerNameValue,
              options.hardening,
              { readOnlyRoot },
            ),
          )
        const on = joining
        joining = undefined
        const created = on ? await egress.createOn(spec.egress!, on, createOn) : await createOn(network)
        made = true
        hostOf.set(created.id, { ...held })
        // Known for every container made here, so an exec needs no inspect to learn its user.
        owners.set(created.id, {
          user: user ?? '',
          workingDir: spec.workingDir,
          egress: spec.egress !== undefined,
          ownedByUser:
            user !== undefined &&
            spec.workingDir !== undefined &&
            (await workdirOwnedBy(created.id, user, { ...spec, mounts: engineMounts }).catch(() => false)),
        })
        return { id: created.id, name: containerNameValue }
      } catch (err) {
        if (!made) await release(held).catch(() => undefined)
        throw ctx.error(err, 'create', { image, name: containerNameValue })
      } finally {
        if (joining) egress.joined(joining)
      }
    },

    async start(id) {
      try {
        await container(id).start()
      } catch (err) {
        if (statusOf(err) === 304) return // already running
        throw ctx.error(err, 'start', { id })
      }
      const own = owners.get(id)
      if (!own) return
      try {
        // The engine made the working directory as root; the agent's user must own it.
        if (unprivileged(own.user) && own.workingDir && !own.ownedByUser)
          await asRoot(id, ['chown', own.user, own.workingDir], 'start')
        if (own.egress) await egress.recheck()
      } catch (err) {
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
      const held = await hostResources(id)
      hostOf.delete(id)
      try {
        owners.delete(id)
        await container(id).remove({ force: true, v: true })
        await release(held)
      } catch (err) {
        const status = statusOf(err)
        if (status === 404) {
          // Already gone (removed from outside, say): its disk goes all the same.
          await release(held).catch(() => undefined)
          return
        }
        if (status === 409 && /already in progress/i.test(String((err as Error).message))) return
        throw ctx.error(err, 'remove', { id })
      }
    },

    createVolume: volumes.createVolume,
    listVolumes: volumes.listVolumes,
    removeVolume: volumes.removeVolume,
    pruneNetworks: (pool, o) => egress.prune(pool, o?.dryRun === true, o?.used),

    isolations,
    exec,
    // Files through the container's shell, as its user: what the agent may touch, Berth may.
    ...execFileOperations({ exec, getArchive: fetchArchive }),

    ensureImage: imageProvisioner(ctx, {
      localName: options.localImageName,
      pullIdleTimeoutMs: options.pullIdleTimeoutMs,
    }),

    async putArchive(id, path, tar) {
      if (await byExec(id)) await putArchiveByExec(exec, id, path, tar)
      else await putArchive(ctx, id, path, tar, { verifyPath: options.verifyPutPath })
      // Extracted as root: hand the files to the container's user.
      const own = owners.get(id)
      if (own && unprivileged(own.user)) await asRoot(id, ['chown', '-R', own.user, path], 'putArchive')
    },

    getArchive: fetchArchive,

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

    async portTarget(id, port) {
      try {
        const raw = (await container(id).inspect()) as {
          State?: { Running?: boolean }
          NetworkSettings?: { IPAddress?: string; Networks?: Record<string, { IPAddress?: string }> | null }
        }
        if (raw.State?.Running !== true)
          throw new ContainerError('not_running', `Container ${id} is not running`, { id })
        // The container's own address on its bridge: no published port, nothing on the host opened.
        const net = raw.NetworkSettings
        const host = Object.values(net?.Networks ?? {}).find((n) => n.IPAddress)?.IPAddress || net?.IPAddress
        return host ? { host, port } : null
      } catch (err) {
        throw ctx.error(err, 'portTarget', { id })
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

    close: async () => egress.close(), // dockerode pools no connections: only the host-network watch stops
  }
}
