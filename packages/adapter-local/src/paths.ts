import { readFile, rename, writeFile } from 'node:fs/promises'
import { join, posix } from 'node:path'
import type { ContainerMount, ContainerState, ResourceLimits } from '@berth/core'
import type { SandboxMode, SandboxUser } from './sandbox.js'

/** What a local "container" is on disk: `<baseDir>/<id>/meta.json` next to its `root/`. */
export interface LocalMeta {
  id: string
  name: string
  image: string
  cmd: string[]
  env: Record<string, string>
  workingDir: string
  labels: Record<string, string>
  mounts: ContainerMount[]
  state: ContainerState
  createdAt: string
  startedAt: string | null
  finishedAt: string | null
  exitCode: number | null
  /** Main process id while started, with its start time (clock ticks since boot) to detect pid reuse. */
  pid: number | null
  pidStart: string | null
  /** How its processes run (absent in metas written before sandboxes: `none`). */
  sandbox?: SandboxMode
  /** Who its commands run as by default, under a privileged sandbox (absent: root). */
  user?: SandboxUser
  /** Limits enforced through the container's cgroup (absent: none enforced). */
  limits?: ResourceLimits
  /** `/tmp` is a tmpfs of this many bytes (bwrap as root); unmounted on remove. */
  tmpBytes?: number
}

/**
 * The directory of one container.
 *
 * @example
 * ```ts
 * containerDir('/srv/berth', id) // '/srv/berth/<id>'
 * ```
 */
export function containerDir(baseDir: string, id: string): string {
  if (!/^[a-f0-9]{12,64}$/.test(id)) throw Object.assign(new Error(`not a container id: ${id}`), { code: 'ENOENT' })
  return join(baseDir, id)
}

/**
 * The host directory that is the container's `/`.
 *
 * @example
 * ```ts
 * rootDir('/srv/berth', id) // '/srv/berth/<id>/root'
 * ```
 */
export function rootDir(baseDir: string, id: string): string {
  return join(containerDir(baseDir, id), 'root')
}

/**
 * A container path as a host path under its root; `..` cannot climb out.
 *
 * @example
 * ```ts
 * hostPath('/srv/berth', 'ab12…', '/workspace/a.txt') // '/srv/berth/ab12…/root/workspace/a.txt'
 * ```
 */
export function hostPath(baseDir: string, id: string, containerPath: string): string {
  return join(rootDir(baseDir, id), posix.normalize(`/${containerPath}`))
}

/**
 * Read a container's metadata; rejects with ENOENT when there is no such container.
 *
 * @example
 * ```ts
 * const { state, pid } = await readMeta(baseDir, id)
 * ```
 */
export async function readMeta(baseDir: string, id: string): Promise<LocalMeta> {
  return JSON.parse(await readFile(join(containerDir(baseDir, id), 'meta.json'), 'utf8')) as LocalMeta
}

/**
 * Write a container's metadata atomically (temp file, then rename); its directory must exist.
 *
 * @example
 * ```ts
 * await writeMeta(baseDir, { ...meta, state: 'exited' })
 * ```
 */
export async function writeMeta(baseDir: string, meta: LocalMeta): Promise<void> {
  const dir = containerDir(baseDir, meta.id)
  const tmp = join(dir, `meta.json.${process.pid}.${Date.now()}.tmp`)
  await writeFile(tmp, JSON.stringify(meta, null, 2))
  await rename(tmp, join(dir, 'meta.json'))
}

/**
 * The host source of a mount: a bind's path, or a volume's directory under `<baseDir>/volumes`.
 *
 * @example
 * ```ts
 * mountSource('/srv/berth', { type: 'volume', source: 'ws1', target: '/workspace' }) // '/srv/berth/volumes/ws1'
 * ```
 */
export function mountSource(baseDir: string, m: ContainerMount): string {
  return m.type === 'volume' ? join(baseDir, 'volumes', m.source) : m.source
}

/**
 * A container path as the host path that holds it: inside the deepest mount that covers
 * it, else under the container's root. `..` cannot climb out.
 *
 * @example
 * ```ts
 * resolvePath(baseDir, meta, '/opt/berth-runner/main.js') // '/srv/runner/main.js' when that is mounted there
 * ```
 */
export function resolvePath(baseDir: string, meta: Pick<LocalMeta, 'id' | 'mounts'>, containerPath: string): string {
  const path = posix.normalize(`/${containerPath}`)
  let best: ContainerMount | undefined
  for (const m of meta.mounts) {
    const target = posix.normalize(`/${m.target}`).replace(/\/$/, '')
    if (
      (path === target || path.startsWith(`${target}/`)) &&
      (!best || target.length > posix.normalize(best.target).length)
    )
      best = m
  }
  if (!best) return hostPath(baseDir, meta.id, path)
  const rest = path.slice(posix.normalize(`/${best.target}`).replace(/\/$/, '').length)
  return join(mountSource(baseDir, best), rest)
}
