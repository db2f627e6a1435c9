/** Named volumes of the local runtime: `<baseDir>/volumes/<name>`, labels beside them in `volume-labels/`. */
import { lstat, mkdir, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { DISK_LABEL, MANAGED_LABEL, releaseDisk, type ContainerRuntime } from '@berth/core'
import type { LocalContext } from './local-context.js'

/**
 * `createVolume`, `listVolumes` and `removeVolume` of a local runtime, and `unmountDisks`
 * for its close. With disks, a volume asked for with `sizeBytes` is its own ext4 disk
 * (`<disk dir>/<name>`, its workspace directory linked from `volumes/<name>`), as the
 * engines' are: a persistent session's files cannot fill the host.
 *
 * @example
 * ```ts
 * const volumes = localVolumes(ctx)
 * await volumes.createVolume('ws-1', { labels: { 'berth.owner': 'usr_1' } })
 * ```
 */
export function localVolumes(ctx: LocalContext): Pick<
  ContainerRuntime,
  'createVolume' | 'listVolumes' | 'removeVolume'
> & {
  unmountDisks(): Promise<void>
} {
  const { baseDir, disks } = ctx
  const checkVolumeName = (name: string) => {
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name))
      throw ctx.fail('engine_error', `invalid volume name ${JSON.stringify(name)}`)
  }
  const labelFile = (name: string) => join(baseDir, 'volume-labels', `${name}.json`)
  const labelsOf = async (name: string): Promise<Record<string, string> | null> =>
    readFile(labelFile(name), 'utf8').then(
      (text) => JSON.parse(text) as Record<string, string>,
      () => null,
    )
  return {
    async createVolume(name, opts = {}) {
      checkVolumeName(name)
      const dir = join(baseDir, 'volumes', name)
      const labels = await labelsOf(name)
      // An existing volume keeps its files; its disk, if it has one, is mounted again and
      // grown to a larger size (the environment's disk_mb grew), never shrunk.
      const existed =
        labels !== null ||
        (await lstat(dir).then(
          () => true,
          () => false,
        ))
      if (existed && disks && labels?.[DISK_LABEL]) await disks.grow(name, opts.sizeBytes ?? 0)
      const made = !existed && disks && opts.sizeBytes ? await disks.make(name, opts.sizeBytes) : undefined
      const disk = made?.mount
      try {
        await mkdir(dirname(dir), { recursive: true })
        // The volume's directory is its disk's workspace, through a link every mount of it follows.
        if (made) await symlink(made.source, dir)
        else await mkdir(dir, { recursive: true })
        // Labels beside the volumes (a volume's own directory is the workspace's files).
        if (labels === null) {
          await mkdir(dirname(labelFile(name)), { recursive: true })
          const all = { ...opts.labels, [MANAGED_LABEL]: 'true', ...(disk && { [DISK_LABEL]: disk }) }
          await writeFile(labelFile(name), JSON.stringify(all))
        }
      } catch (err) {
        if (disk) await releaseDisk(disk).catch(() => undefined)
        throw err
      }
    },

    async listVolumes(filter = {}) {
      await ctx.ensureBase()
      const dir = join(baseDir, 'volume-labels')
      const out: { name: string; labels: Record<string, string> }[] = []
      for (const file of await readdir(dir).catch(() => [] as string[])) {
        const labels = JSON.parse(await readFile(join(dir, file), 'utf8').catch(() => '{}')) as Record<string, string>
        const ok = Object.entries(filter.labels ?? {}).every(([k, v]) => (v === true ? k in labels : labels[k] === v))
        if (ok && file.endsWith('.json')) out.push({ name: file.slice(0, -'.json'.length), labels })
      }
      return out
    },

    async removeVolume(name) {
      checkVolumeName(name)
      const disk = (await labelsOf(name))?.[DISK_LABEL]
      await rm(join(baseDir, 'volumes', name), { recursive: true, force: true })
      await rm(labelFile(name), { force: true })
      // Its disk goes too, named by its label, so any runtime (one without disks, a restarted server) releases it.
      if (disk) await releaseDisk(disk)
    },

    /**
     * Unmount the volumes' disks no sandbox holds (their images kept): a stopped server
     * leaves no mount behind, and a volume's next use (`createVolume`, a container that
     * mounts it) mounts its disk again.
     */
    async unmountDisks() {
      if (!disks) return
      const dir = join(baseDir, 'volume-labels')
      for (const file of await readdir(dir).catch(() => [] as string[])) {
        const name = file.slice(0, -'.json'.length)
        if (file.endsWith('.json') && (await labelsOf(name))?.[DISK_LABEL] === join(disks.dir, name))
          await disks.unmount(name)
      }
    },
  }
}
