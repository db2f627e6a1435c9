import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { rootDir } from './paths.js'

const run = promisify(execFile)

/**
 * A sized tmpfs over a sandboxed container's `/tmp` (`<root>/tmp` on the host), so its
 * scratch files never reach the host's disk. Needs root (a mount on the host); elsewhere
 * `/tmp` stays a plain directory and resolves `false`.
 *
 * @example
 * ```ts
 * await mountScratch(baseDir, id, 512 * 1024 ** 2) // true: /tmp is 512 MiB of memory
 * ```
 */
export async function mountScratch(baseDir: string, id: string, bytes: number): Promise<boolean> {
  if (process.getuid?.() !== 0) return false
  const size = `${Math.max(1, Math.floor(bytes / 1024))}k`
  await run('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=1777,nosuid,nodev`, 'tmpfs', scratchDir(baseDir, id)])
  return true
}

/**
 * Unmount a container's `/tmp` tmpfs before its directory goes (lazily: a process still
 * inside keeps it until it exits); absent mounts resolve.
 *
 * @example
 * ```ts
 * await unmountScratch(baseDir, id)
 * ```
 */
export async function unmountScratch(baseDir: string, id: string): Promise<void> {
  await run('umount', ['-l', scratchDir(baseDir, id)]).catch(() => undefined)
}

function scratchDir(baseDir: string, id: string): string {
  return join(rootDir(baseDir, id), 'tmp')
}
