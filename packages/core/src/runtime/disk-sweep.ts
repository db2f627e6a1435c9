/** Disks a killed server left behind: made, but never handed to a container or a volume. */
import { readdir, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import type { ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import { DISK_LABEL, type DiskOptions, releaseUnusedDisk } from './disks.js'

/** Options of {@link sweepOrphanDisks}. */
export interface DiskSweepOptions extends DiskOptions {
  /** The runtime whose containers and volumes may reference the disks. */
  runtime: Pick<ContainerRuntime, 'list' | 'listVolumes'>
  logger: Pick<Logger, 'info' | 'warn'>
  /** A disk younger than this is kept, referenced or not (default 10 minutes). */
  graceMs?: number
}

/** The default {@link DiskSweepOptions.graceMs}. */
const GRACE_MS = 10 * 60_000

/**
 * Release every container disk under `dir` that no container (label `berth.disk`) or volume
 * (its label, or its name) of `runtime` references, whose image is older than the grace
 * period and that no container uses (one of another engine sharing the directory, say: see
 * `releaseUnusedDisk`): a server killed between making a disk and creating its container
 * leaks a mounted loop disk otherwise. Volumes' disks are left: they hold sessions' files. Several instances may share one engine and one disk directory, and
 * another instance's disk is unreferenced for the moment between its `make` and its
 * container's create: the grace period, far longer than that moment, is what keeps such a
 * disk from being taken. Resolves the released mount directories.
 *
 * @example
 * ```ts
 * const released = await sweepOrphanDisks({ dir: '/var/lib/berth/disks', runtime, logger })
 * ```
 */
export async function sweepOrphanDisks(o: DiskSweepOptions): Promise<string[]> {
  const dir = resolve(o.dir)
  const names = await readdir(dir).catch(() => [] as string[])
  // Containers' disks only (`berth-` and 12 hex digits): a volume's disk is its session's
  // files, and a volume made again finds its disk and takes it back.
  const images = names.filter((n) => /^berth-[0-9a-f]{12}\.img$/.test(n))
  if (!images.length) return []
  // Listed after the directory: a disk made since is young, so the grace period keeps it.
  const used = new Set<string>()
  for (const c of await o.runtime.list({ labels: { [DISK_LABEL]: true }, all: true })) {
    const disk = c.labels[DISK_LABEL]
    if (disk) used.add(resolve(disk))
  }
  for (const v of await o.runtime.listVolumes()) {
    used.add(join(dir, v.name))
    const disk = v.labels[DISK_LABEL]
    if (disk) used.add(resolve(disk))
  }
  const cutoff = Date.now() - (o.graceMs ?? GRACE_MS)
  const released: string[] = []
  for (const image of images) {
    const mount = join(dir, image.slice(0, -'.img'.length))
    if (used.has(mount)) continue
    const info = await stat(join(dir, image)).catch(() => null)
    if (!info || info.mtimeMs > cutoff) continue
    try {
      if (await releaseUnusedDisk(mount)) released.push(mount)
      else o.logger.info('an unreferenced disk is in use elsewhere, kept', { disk: mount })
    } catch (err) {
      o.logger.warn('could not release an orphan disk', { disk: mount, error: String(err) })
    }
  }
  if (released.length) o.logger.info('orphan disks released', { dir, released })
  return released
}
