/** Named volumes on an Engine-API runtime: labelled, and sized on a workspace disk where the runtime has disks. */
import { join, resolve } from 'node:path'
import {
  DISK_LABEL,
  MANAGED_LABEL,
  releaseDisk,
  type ContainerRuntime,
  type ContainerSpec,
  type DiskOptions,
  type ListFilter,
  type WorkspaceDisks,
} from '@berth/core'
import type { EngineContext } from './context.js'
import { statusOf } from './errors.js'

/** The engine's label filters for `filter`, `berth.managed=true` always among them. */
export function labelFilters(filter: ListFilter = {}): string[] {
  const out = [`${MANAGED_LABEL}=true`]
  for (const [k, v] of Object.entries(filter.labels ?? {})) out.push(v === true ? k : `${k}=${v}`)
  return out
}

/**
 * `createVolume`, `listVolumes` and `removeVolume`, plus `remountDisks` for a container's
 * volume mounts. With disks, a volume asked for with `sizeBytes` is a bind of its own ext4
 * disk (`<dir>/<volume>.img`, the mechanism of container workspaces): an engine volume has
 * no size of its own on overlay over ext4, and a persistent session would otherwise write
 * to the host's filesystem without limit.
 */
export function engineVolumes(ctx: EngineContext, disks: WorkspaceDisks | undefined, diskOptions?: DiskOptions) {
  const { docker } = ctx
  const volumes: Pick<ContainerRuntime, 'createVolume' | 'listVolumes' | 'removeVolume'> = {
    async createVolume(volume, opts = {}) {
      try {
        const labels = { ...opts.labels, [MANAGED_LABEL]: 'true' }
        if (disks && opts.sizeBytes) {
          const existing = (await docker
            .getVolume(volume)
            .inspect()
            .catch((err: unknown) => {
              if (statusOf(err) === 404) return null
              throw err
            })) as { Labels?: Record<string, string> | null } | null
          // An existing volume keeps its files; its disk, if it has one, is mounted again and
          // grown to a larger size (the environment's disk_mb grew), never shrunk.
          if (existing) {
            if (existing.Labels?.[DISK_LABEL]) await disks.grow(volume, opts.sizeBytes)
            return
          }
          const { mount, source } = await disks.make(volume, opts.sizeBytes)
          await docker
            .createVolume({
              Name: volume,
              Labels: { ...labels, [DISK_LABEL]: mount },
              Driver: 'local',
              DriverOpts: { type: 'none', o: 'bind', device: source },
            })
            .catch(async (err: unknown) => {
              await releaseDisk(mount)
              throw err
            })
          return
        }
        // Both engines answer an existing name with that volume, unchanged.
        await docker.createVolume({ Name: volume, Labels: labels })
      } catch (err) {
        throw ctx.error(err, 'createVolume', { volume })
      }
    },

    async listVolumes(filter) {
      try {
        const { Volumes } = await docker.listVolumes({ filters: { label: labelFilters(filter) } })
        // Podman ORs several label filters on volumes (Docker ANDs them): every one must match.
        const wanted: [string, string | true][] = Object.entries({ ...filter?.labels, [MANAGED_LABEL]: 'true' })
        return (Volumes ?? [])
          .map((v) => ({ name: v.Name, labels: v.Labels ?? {} }))
          .filter((v) => wanted.every(([k, want]) => (want === true ? k in v.labels : v.labels[k] === want)))
      } catch (err) {
        throw ctx.error(err, 'listVolumes')
      }
    },

    async removeVolume(name) {
      // Its disk goes too, named by its label, so any runtime (one without disks, a restarted
      // server) releases it; absent disks resolve.
      const info = (await docker
        .getVolume(name)
        .inspect()
        .catch(() => null)) as { Labels?: Record<string, string> | null } | null
      try {
        await docker.getVolume(name).remove({ force: true })
      } catch (err) {
        if (statusOf(err) !== 404) throw ctx.error(err, 'removeVolume', { volume: name })
      }
      const disk = info?.Labels?.[DISK_LABEL] ?? (diskOptions && join(resolve(diskOptions.dir), name))
      if (disk && /^[\w.-]+$/.test(name)) await releaseDisk(disk)
    },
  }
  return {
    ...volumes,
    /** Mount again the disks of the volumes `mounts` name (after a reboot), before the engine binds them. */
    async remountDisks(mounts: ContainerSpec['mounts']): Promise<void> {
      if (!disks) return
      for (const m of mounts ?? []) if (m.type === 'volume' && /^[\w.-]+$/.test(m.source)) await disks.remount(m.source)
    },
  }
}
