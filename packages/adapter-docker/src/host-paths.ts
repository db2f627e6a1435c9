import { readFileSync } from 'node:fs'
import { hostname } from 'node:os'
import type { ContainerMount } from '@berth/core'
import type Docker from 'dockerode'
import { statusOf } from './errors.js'

/** A mount of the container Berth runs in: where the engine's host has it, and where Berth sees it. */
export interface OwnMount {
  /** The host path (a bind's source, a volume's mount point on the engine's host). */
  source: string
  /** Where it appears inside Berth's own container. */
  destination: string
}

/**
 * Ids that may name the container this process runs in: the container directory behind
 * `/etc/hostname` in `/proc/self/mountinfo` (Docker: `…/containers/<id>/hostname`, Podman:
 * `…/overlay-containers/<id>/userdata/hostname`), then the hostname (Docker's default is the
 * short id). Outside a container the engine knows none of them.
 */
function candidateIds(mountinfo: string): string[] {
  const ids = [...mountinfo.matchAll(/containers\/([0-9a-f]{64})\/(?:userdata\/)?hostname\s/g)].map((m) => m[1]!)
  return [...new Set([...ids, hostname()])]
}

/**
 * The mounts of the container this process runs in, when that container belongs to the
 * engine `docker` talks to (Berth in a container driving its host's engine through the
 * mounted socket); `null` when it runs elsewhere (on the host, or against another engine).
 */
export async function ownContainerMounts(
  docker: Docker,
  mountinfoPath = '/proc/self/mountinfo',
): Promise<OwnMount[] | null> {
  let mountinfo = ''
  try {
    mountinfo = readFileSync(mountinfoPath, 'utf8')
  } catch {
    // not Linux: never inside a Linux container
  }
  for (const id of candidateIds(mountinfo)) {
    try {
      const info = (await docker.getContainer(id).inspect()) as { Mounts?: { Source?: string; Destination?: string }[] }
      return (info.Mounts ?? [])
        .filter((m): m is Required<Pick<typeof m, 'Source' | 'Destination'>> => !!m.Source && !!m.Destination)
        .map((m) => ({ source: m.Source, destination: m.Destination }))
    } catch (err) {
      if (statusOf(err) !== 404) throw err
    }
  }
  return null
}

/**
 * A bind mount's source as the engine's host sees it: a path under one of Berth's own mounts
 * (the deepest that holds it) moved to that mount's host path. Throws for a path on the
 * container's own filesystem, which the engine cannot mount into another container.
 *
 * @example
 * ```ts
 * toHostPath('/data/broker/public', [{ source: '/var/lib/docker/volumes/berth/_data', destination: '/data' }])
 * // '/var/lib/docker/volumes/berth/_data/broker/public'
 * ```
 */
export function toHostPath(path: string, mounts: readonly OwnMount[]): string {
  const holding = mounts
    .filter((m) => path === m.destination || path.startsWith(`${m.destination.replace(/\/$/, '')}/`))
    .sort((a, b) => b.destination.length - a.destination.length)[0]
  if (!holding) {
    throw new Error(
      `${path} is inside Berth's own container, where the engine cannot mount it into a task container: ` +
        'put it on a volume (the server image keeps its data on /data)',
    )
  }
  return holding.source + path.slice(holding.destination.replace(/\/$/, '').length)
}

/**
 * Bind mounts rewritten for the engine's host: when Berth runs in a container of the same
 * engine, a path it names (its data dir's broker sockets, a runner bundle) is a path in its
 * own container, and the engine resolves bind sources on its host. Looked up once, on the
 * first bind mount; volumes and the host case pass unchanged.
 */
export function hostPathMapper(docker: Docker): (mounts: readonly ContainerMount[]) => Promise<ContainerMount[]> {
  let own: Promise<OwnMount[] | null> | undefined
  return async (mounts) => {
    if (!mounts.some((m) => m.type === 'bind')) return [...mounts]
    own ??= ownContainerMounts(docker).catch((err: unknown) => {
      own = undefined // asked again at the next create
      throw err
    })
    const found = await own
    if (!found) return [...mounts]
    return mounts.map((m) => (m.type === 'bind' ? { ...m, source: toHostPath(m.source, found) } : m))
  }
}
