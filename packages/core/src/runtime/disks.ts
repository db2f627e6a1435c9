import { execFile } from 'node:child_process'
import { mkdir, open, readdir, rm, rmdir, stat, truncate } from 'node:fs/promises'
import { basename, isAbsolute, join, resolve } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** Size-limited workspace filesystems (loop-mounted ext4 images), shared by every runtime that sizes workspaces. */

/** Where size-limited workspace filesystems are made (on the engine's own host). */
export interface DiskOptions {
  /**
   * A host directory for one sparse ext4 image per container (`<name>.img`) and its loop
   * mount (`<name>/`), bind-mounted at the container's working directory. Needs root and
   * an engine on this machine; the image only takes the blocks the agent writes.
   */
  dir: string
}

/**
 * The label holding a container's workspace disk (its host mount directory), so whichever
 * runtime removes the container (a restarted server, a test's sweep) releases the disk too.
 */
export const DISK_LABEL = 'berth.disk'

/** A workspace disk on the host. */
export interface Disk {
  /** Its mount directory: what {@link DISK_LABEL} names and {@link releaseDisk} takes. */
  mount: string
  /** The directory to bind at the container's working directory (the workspace). */
  source: string
}

/**
 * The filesystem label of disks whose workspace is the `workspace` directory of their
 * filesystem. Earlier disks have none: their workspace is the filesystem's root, beside
 * ext4's own `lost+found` (see {@link tidyOldDisks}).
 */
const LAYOUT_LABEL = 'berth-workspace'
/** The workspace's directory on a disk with {@link LAYOUT_LABEL}. */
const WORKSPACE_SUBDIR = 'workspace'
/** How disks are mounted: no set-uid programs, no device files. */
const LOOP = 'loop,nosuid,nodev'

/**
 * Size-limited workspace filesystems: ext4 is the one limit that holds on any host
 * filesystem (overlay's `--storage-opt size` needs xfs with project quotas, a tmpfs would
 * count against the container's memory). A full disk answers the agent's writes with
 * ENOSPC and leaves the host's filesystem untouched.
 *
 * @example
 * ```ts
 * const disks = workspaceDisks({ dir: '/var/lib/berth/disks' })
 * const { mount, source } = await disks.make('berth-3f9a0c12ab34', 2 * 1024 ** 3) // bind `source` at /workspace
 * await disks.grow('berth-3f9a0c12ab34', 4 * 1024 ** 3) // online, while the container runs
 * await releaseDisk(mount) // after the container is removed
 * ```
 */
export function workspaceDisks(options: DiskOptions) {
  const dir = resolve(options.dir) // a bind mount's source must be absolute
  const paths = (name: string) => {
    if (!/^[\w.-]+$/.test(name)) throw new Error(`not a disk name: ${name}`)
    return { image: join(dir, `${name}.img`), mount: join(dir, name) }
  }
  /** Mount `image` at `mount`; an earlier version's disk loses its `lost+found` there. */
  const mountAt = async (image: string, mount: string) => {
    await run('mount', ['-o', LOOP, image, mount])
    await tidyOldDisk(image, mount)
  }
  /**
   * Mount the disk of `name` again when its image exists but is not mounted (after a
   * reboot), so a bind to it never lands on the host's filesystem; resolves its host
   * directory, or null when `name` has no disk.
   */
  const remount = async (name: string): Promise<string | null> => {
    const { image, mount } = paths(name)
    if (await mounted(mount)) return mount
    if (!(await stat(image).catch(() => null))) return null
    await mkdir(mount, { recursive: true })
    await mountAt(image, mount)
    return mount
  }
  return {
    /** The absolute directory the disks are in. */
    dir,
    /**
     * Make (or mount again, after a reboot or a lost volume record) the disk of `name`. Its
     * workspace is a directory of the filesystem, so ext4's own entries (`lost+found`, which
     * e2fsck makes again whenever it is missing) stay out of the agent's `/workspace`.
     */
    async make(name: string, sizeBytes: number): Promise<Disk> {
      const { image, mount } = paths(name)
      await mkdir(mount, { recursive: true })
      let fresh = false
      if (!(await mounted(mount))) {
        const file = await open(image, 'wx').catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'EEXIST') return null // made before: mount it again
          throw err
        })
        if (file) {
          await file.truncate(Math.max(sizeBytes, 8 * 1024 ** 2))
          await file.close()
          // No reserved blocks: the agent gets the whole size. A container's disk goes with its
          // container, so it has no journal (64 MiB written per 4 GiB disk, for a recovery it never
          // needs); a volume's disk keeps a session's files across restarts, and its journal.
          const journal = isDiskName(name) && !name.startsWith('berth-ws-') ? ['-O', '^has_journal'] : []
          await run('mkfs.ext4', ['-q', '-F', '-m', '0', ...journal, '-L', LAYOUT_LABEL, image])
          fresh = true
        }
        await (fresh ? run('mount', ['-o', LOOP, image, mount]) : mountAt(image, mount))
      }
      if (!fresh && !(await hasSubdir(image))) return { mount, source: mount }
      const source = join(mount, WORKSPACE_SUBDIR)
      await mkdir(source, { recursive: true })
      return { mount, source }
    },
    remount,
    /**
     * Unmount the disk of `name` (its image kept) unless a container still uses it, as
     * {@link releaseUnusedDisk} tells; it is mounted again on its next use. Resolves whether
     * it is unmounted now.
     */
    unmount: (name: string): Promise<boolean> => unmountUnused(paths(name).mount),
    /**
     * Mount the disk of `name` again if need be, and grow it to `sizeBytes`, its files kept:
     * the image is extended, the loop device told (`losetup -c`) and ext4 resized online
     * (`resize2fs`, which needs CAP_SYS_RESOURCE); where that is refused (a host without the
     * capability), offline while nothing else holds the disk. A disk still held elsewhere (a
     * running container, there) keeps its size until next time. A smaller size leaves it as
     * it is: ext4 cannot shrink while mounted. Resolves whether it grew.
     */
    async grow(name: string, sizeBytes: number): Promise<boolean> {
      const { image, mount } = paths(name)
      if ((await remount(name)) === null) return false
      const { size } = await stat(image)
      const device = await loopOf(image)
      if (size >= sizeBytes || !device) return false
      await truncate(image, sizeBytes)
      await run('losetup', ['-c', device])
      if (await run('resize2fs', [device]).then(ok, no)) return true
      // Offline: unmounted here, the loop device goes with its last mount (autoclear) unless held elsewhere.
      const unmounted = await run('umount', [mount]).then(ok, no) // busy: a host process works in it
      const held = unmounted ? await released(image) : device
      try {
        if (held) {
          // Back to the size its filesystem has; mounting it again shares the held device and filesystem.
          await truncate(image, size)
          await run('losetup', ['-c', held])
          return false
        }
        await run('e2fsck', ['-f', '-y', image]).catch((err: { code?: number }) => {
          if (err.code !== 1) throw err // 1: errors corrected
        })
        await run('resize2fs', [image])
        return true
      } finally {
        if (unmounted) await mountAt(image, mount)
      }
    },
  }
}

/**
 * Unmount and delete the disk mounted at `mount` (its image is `<mount>.img`), as named by a
 * container's {@link DISK_LABEL}; absent disks resolve. Only Berth's own disk names are
 * touched (`berth-` and hex digits, or a workspace volume's `berth-ws-…`), whatever a label says.
 *
 * @example
 * ```ts
 * await releaseDisk('/var/lib/berth/disks/berth-3f9a0c12ab34')
 * ```
 */
export async function releaseDisk(mount: string): Promise<void> {
  if (!isAbsolute(mount) || !isDiskName(basename(mount))) return
  if (await mounted(mount)) {
    // Two releasers of one disk (a server's reap and another runtime's remove) may race: only
    // a mount that is still there is a failure.
    await run('umount', [mount]).catch(async (err: unknown) => {
      if (await mounted(mount)) throw err
    })
  }
  await rm(mount, { recursive: true, force: true })
  await rm(`${mount}.img`, { force: true })
}

/**
 * {@link releaseDisk}, unless a container still uses the disk: after its mount here goes, a
 * loop device that stays attached is held by some mount namespace (a running container of
 * any engine or sandbox on this host, which this runtime may not see); the disk is then
 * mounted again as it was and kept. Resolves whether it was released.
 *
 * @example
 * ```ts
 * if (!(await releaseUnusedDisk(mount))) logger.info('disk in use elsewhere', { mount })
 * ```
 */
export async function releaseUnusedDisk(mount: string): Promise<boolean> {
  if (!isAbsolute(mount) || !isDiskName(basename(mount))) return false
  if (!(await unmountUnused(mount))) return false
  await releaseDisk(mount)
  return true
}

/** Unmount the disk at `mount` unless a host process works in it or a container holds its loop device; whether it is unmounted now. */
async function unmountUnused(mount: string): Promise<boolean> {
  const image = `${mount}.img`
  if (!(await mounted(mount))) return true
  if (!(await run('umount', [mount]).then(ok, no))) return false // busy: a host process works in it
  if (await released(image)) {
    await run('mount', ['-o', LOOP, image, mount]) // shares the held device and filesystem
    return false
  }
  return true
}

/**
 * Whether `name` is one of Berth's disk names: `berth-` and 12 hex digits (a container's) or
 * `berth-ws-…` (a workspace volume's).
 *
 * @example
 * ```ts
 * isDiskName('berth-3f9a0c12ab34') // true
 * ```
 */
export function isDiskName(name: string): boolean {
  return /^berth-(?:[0-9a-f]{12}|ws-[\w-]+)$/.test(name)
}

/**
 * Take ext4's `lost+found` out of the workspaces of the disks under `dir` that an earlier
 * version made (their workspace is the filesystem's root) and that are mounted now: a
 * container or volume adopted at start keeps its disk mounted, so no mount here tidies it.
 * Disks this version makes keep their workspace in a directory of the filesystem instead.
 *
 * @example
 * ```ts
 * await tidyOldDisks('/var/lib/berth/disks')
 * ```
 */
export async function tidyOldDisks(dir: string): Promise<void> {
  const names = await readdir(dir).catch(() => [] as string[])
  for (const image of names.filter((n) => n.endsWith('.img') && isDiskName(n.slice(0, -'.img'.length)))) {
    const mount = join(dir, image.slice(0, -'.img'.length))
    if (await mounted(mount)) await tidyOldDisk(join(dir, image), mount)
  }
}

/** The type `workspaceDisks` returns. */
export type WorkspaceDisks = ReturnType<typeof workspaceDisks>

const ok = () => true
const no = () => false

/** The loop device backing `image` (`/dev/loop3`), or undefined when none does. */
async function loopOf(image: string): Promise<string | undefined> {
  const { stdout } = await run('losetup', ['-j', image])
  return /^(\/dev\/loop\d+):/.exec(stdout)?.[1]
}

/**
 * The loop device still backing `image` after its last mount here went, or undefined once it
 * is detached: a container removed a moment ago lets go of it as its processes die, so this
 * waits up to 2 s before calling the disk held.
 */
async function released(image: string): Promise<string | undefined> {
  for (let i = 0; ; i++) {
    const device = await loopOf(image)
    if (!device || i === 20) return device
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** Whether the disk's workspace is the `workspace` directory of its filesystem (a disk this version made), by its label. */
async function hasSubdir(image: string): Promise<boolean> {
  const { stdout } = await run('e2label', [image])
  return stdout.trim() === LAYOUT_LABEL
}

/**
 * An earlier version's disk, mounted at `mount`, without ext4's `lost+found` in its
 * workspace: that directory is root's and unreadable to the agent, so a fork or a download
 * of the workspace would stop at it, and nothing but e2fsck uses it (which makes it again).
 * Kept when it holds what e2fsck recovered; the file routes refuse writes there.
 */
async function tidyOldDisk(image: string, mount: string): Promise<void> {
  if (await hasSubdir(image)) return
  await rmdir(join(mount, 'lost+found')).catch(() => undefined) // absent, or not empty
}

/** Whether `dir` is a mount point (a disk mounted there). */
async function mounted(dir: string): Promise<boolean> {
  return run('mountpoint', ['-q', dir]).then(
    () => true,
    () => false,
  )
}
