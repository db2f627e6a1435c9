import { execFile } from 'node:child_process'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { rootDir } from './paths.js'

const run = promisify(execFile)

/**
 * The container's own writable directories that live on the host's disk unless covered:
 * `/tmp` (every user's, sticky) and root's HOME `/root`. The rest of a sandbox's `/` is
 * the host's system directories read-only, bubblewrap's in-memory root, or a mount.
 */
const SCRATCH = [
  { dir: 'tmp', mode: '1777' },
  { dir: 'root', mode: '700' },
] as const

/**
 * A sized tmpfs over each of a sandboxed container's scratch directories (`/tmp` and
 * `/root`, `<root>/tmp` and `<root>/root` on the host, each of `bytes`), so their files never
 * reach the host's disk. Needs root (a mount on the host); elsewhere they stay plain
 * directories and it resolves `false`.
 *
 * @example
 * ```ts
 * await mountScratch(baseDir, id, 512 * 1024 ** 2) // true: /tmp and /root are 512 MiB of memory each
 * ```
 */
export async function mountScratch(baseDir: string, id: string, bytes: number): Promise<boolean> {
  if (process.getuid?.() !== 0) return false
  const size = `${Math.max(1, Math.floor(bytes / 1024))}k`
  try {
    for (const { dir, mode } of SCRATCH) {
      const where = join(rootDir(baseDir, id), dir)
      // A mount point made inside (a spec's mount below /root) stays on the host's disk rather than vanish.
      if ((await readdir(where).catch(() => [])).length > 0) continue
      await run('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=${mode},nosuid,nodev`, 'tmpfs', where])
    }
  } catch (err) {
    await unmountScratch(baseDir, id)
    throw err
  }
  return true
}

/**
 * Unmount a container's scratch tmpfs before its directory goes (lazily: a process still
 * inside keeps it until it exits); absent mounts resolve.
 *
 * @example
 * ```ts
 * await unmountScratch(baseDir, id)
 * ```
 */
export async function unmountScratch(baseDir: string, id: string): Promise<void> {
  for (const { dir } of SCRATCH) await run('umount', ['-l', join(rootDir(baseDir, id), dir)]).catch(() => undefined)
}
