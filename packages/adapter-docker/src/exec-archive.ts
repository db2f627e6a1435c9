/**
 * Archives through `tar` run in the container, for engines whose archive endpoint cannot
 * reach a gVisor container's files (Podman's copier joins the host-side mount namespace,
 * where runsc keeps no rootfs).
 */
import { collectExec, ContainerError, toWebStream, type ByteSource, type ContainerRuntime } from '@berth/core'
import { dirname, basename } from 'node:path/posix'
import type Docker from 'dockerode'
import { ISOLATION_LABEL } from './hardening.js'

/**
 * Whether the container runs under gVisor (its `berth.isolation` label).
 *
 * @example
 * ```ts
 * if (await runsGvisor(docker, id)) await putArchiveByExec(rt.exec, id, '/workspace', tar)
 * ```
 */
export async function runsGvisor(docker: Docker, id: string): Promise<boolean> {
  const info = (await docker
    .getContainer(id)
    .inspect()
    .catch(() => null)) as { Config?: { Labels?: Record<string, string> | null } } | null
  return info?.Config?.Labels?.[ISOLATION_LABEL] === 'gvisor'
}

/**
 * Extract `tar` into the existing directory `path` with the container's own `tar`, as root.
 *
 * @example
 * ```ts
 * await putArchiveByExec(rt.exec, id, '/workspace', tarBytes)
 * ```
 */
export async function putArchiveByExec(
  exec: ContainerRuntime['exec'],
  id: string,
  path: string,
  tar: ByteSource,
): Promise<void> {
  const check = await collectExec(await exec(id, { cmd: ['test', '-d', path], user: '0' }))
  if (check.exitCode !== 0)
    throw new ContainerError('not_found', `No directory ${path} in container ${id}`, { id, path })
  const r = await collectExec(await exec(id, { cmd: ['tar', '-x', '-f', '-', '-C', path], user: '0', stdin: tar }))
  if (r.exitCode !== 0)
    throw new ContainerError(
      'engine_error',
      `tar -x into ${path} exited ${r.exitCode}: ${r.stderr.trim().slice(0, 300)}`,
      {
        id,
        path,
      },
    )
}

/**
 * A tar of `path` made by the container's own `tar`, its top entry the path's base name
 * (as the Engine API names it).
 *
 * @example
 * ```ts
 * const tar = await getArchiveByExec(rt.exec, id, '/workspace')
 * ```
 */
export async function getArchiveByExec(
  exec: ContainerRuntime['exec'],
  id: string,
  path: string,
): Promise<ReadableStream<Uint8Array>> {
  const check = await collectExec(await exec(id, { cmd: ['test', '-e', path], user: '0' }))
  if (check.exitCode !== 0) throw new ContainerError('not_found', `No path ${path} in container ${id}`, { id, path })
  const p = await exec(id, { cmd: ['tar', '-c', '-f', '-', '-C', dirname(path), basename(path) || '.'], user: '0' })
  return toWebStream(p.stdout, () => p.kill())
}
