import { execFile } from 'node:child_process'
import { mkdir, open, rm, stat, truncate } from 'node:fs/promises'
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

/**
 * Size-limited workspace filesystems: ext4 is the one limit that holds on any host
 * filesystem (overlay's `--storage-opt size` needs xfs with project quotas, a tmpfs would
 * count against the container's memory). A full disk answers the agent's writes with
 * ENOSPC and leaves the host's filesystem untouched.
 *
 * @example
 * ```ts
 * const disks = workspaceDisks({ dir: '/var/lib/berth/disks' })
 * const hostDir = await disks.make('berth-3f9a0c12ab34', 2 * 1024 ** 3) // bind it at /workspace
 * await disks.grow('berth-3f9a0c12ab34', 4 * 1024 ** 3) // online, while the container runs
 * await releaseDisk(hostDir) // after the container is removed
 * ```
 */
export function workspaceDisks(options: DiskOptions) {
  const dir = resolve(options.dir) // a bind mount's source must be absolute
  const paths = (name: string) => {
    if (!/^[\w.-]+$/.test(name)) throw new Error(`not a disk name: ${name}`)
    return { image: join(dir, `${name}.img`), mount: join(dir, name) }
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
    await run('mount', ['-o', 'loop,nosuid,nodev', image, mount])
    return mount
  }
  return {
    /** The absolute directory the disks are in. */
    dir,
    /** Make (or remount after a reboot) the disk of `name`; resolves the host directory to bind. */
    async make(name: string, sizeBytes: number): Promise<string> {
      const { image, mount } = paths(name)
      await mkdir(mount, { recursive: true })
      if (await mounted(mount)) return mount
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
        await run('mkfs.ext4', ['-q', '-F', '-m', '0', ...journal, image])
      }
      await run('mount', ['-o', 'loop,nosuid,nodev', image, mount])
      return mount
    },
    remount,
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
        if (unmounted) await run('mount', ['-o', 'loop,nosuid,nodev', image, mount])
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
  const image = `${mount}.img`
  if (await mounted(mount)) {
    if (!(await run('umount', [mount]).then(ok, no))) return false // busy: a host process works in it
    if (await released(image)) {
      await run('mount', ['-o', 'loop,nosuid,nodev', image, mount]) // shares the held device and filesystem
      return false
    }
  }
  await releaseDisk(mount)
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

/** Whether `dir` is a mount point (a disk mounted there). */
async function mounted(dir: string): Promise<boolean> {
  return run('mountpoint', ['-q', dir]).then(
    () => true,
    () => false,
  )
}
