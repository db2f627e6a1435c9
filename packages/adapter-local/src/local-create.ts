/** Creating a local container: its directories (root, tmp, mount points), cgroup and meta. */
import { randomBytes } from 'node:crypto'
import { spawn } from 'node:child_process'
import { chmod, mkdir, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { DISK_LABEL, IDLE_COMMAND, MANAGED_LABEL, releaseDisk, type ContainerSpec } from '@berth/core'
import type { LocalContext } from './local-context.js'
import { launch } from './local-launch.js'
import { ROOT } from './sandbox.js'
import { parseUser } from './users.js'
import { mountScratch, unmountScratch } from './scratch-tmpfs.js'
import { containerDir, hostPath, mountSource, resolvePath, rootDir, writeMeta, type LocalMeta } from './paths.js'

const NO_ISOLATION =
  'local runtime: commands run as plain host processes with NO isolation (no namespaces, ' +
  'no resource limits, full access to the host as this user). Development only: use Docker or Podman for anything else.'

/**
 * Create (not start) a local container: `<baseDir>/<id>/root` stands for its `/`, mounts
 * are mount points (bwrap) or links (no sandbox), limits go to a cgroup of its own.
 * Refuses an egress policy it cannot enforce; warns on every create without a sandbox.
 *
 * @example
 * ```ts
 * const { id } = await createContainer(ctx, { image: 'ignored', workingDir: '/workspace' })
 * ```
 */
export async function createContainer(ctx: LocalContext, spec: ContainerSpec): Promise<{ id: string; name: string }> {
  // A size-limited workspace, unless something (a session's volume) is mounted there: a disk
  // of its own bound at the working directory, named in a label so any runtime releases it.
  const dir = spec.workingDir
  const bytes = spec.limits?.diskBytes
  const sized = ctx.disks && bytes && dir && !spec.mounts?.some((m) => m.target === dir)
  // Named like an engine's generated container (what `releaseDisk` accepts).
  const disk = sized ? await ctx.disks?.make(`berth-${randomBytes(6).toString('hex')}`, bytes) : undefined
  // A volume's disk is mounted again after a reboot, so its bind never lands on the host's filesystem.
  for (const m of spec.mounts ?? [])
    if (m.type === 'volume' && /^[\w.-]+$/.test(m.source)) await ctx.disks?.remount(m.source)
  if (!disk || !dir) return createIn(ctx, spec)
  try {
    return await createIn(ctx, {
      ...spec,
      mounts: [...(spec.mounts ?? []), { type: 'bind', source: disk.source, target: dir }],
      labels: { ...spec.labels, [DISK_LABEL]: disk.mount },
    })
  } catch (err) {
    await releaseDisk(disk.mount).catch(() => undefined) // no container came of it
    throw err
  }
}

async function createIn(ctx: LocalContext, spec: ContainerSpec): Promise<{ id: string; name: string }> {
  const { baseDir, sandbox, cgroups, logger, fail, ensureBase } = ctx
  // Refused, never quietly weakened to a bubblewrap sandbox on the host's kernel.
  if (spec.isolation === 'gvisor')
    throw fail('unsupported', 'the local runtime cannot run gVisor isolation (use Docker or Podman with runsc)', {
      op: 'create',
    })
  // Fail closed: a policy this runtime cannot enforce is refused, not ignored. Under bwrap
  // every policy holds: the sandbox's only way out is the broker's egress proxy.
  if (spec.egress && sandbox.mode !== 'bwrap') {
    throw fail(
      'engine_error',
      `the local runtime cannot enforce the ${spec.egress.policy} network policy (no bubblewrap sandbox)`,
      { op: 'create' },
    )
  }
  // A non-root user is honoured where the sandbox can set host uids (a root server).
  const user = spec.user && sandbox.setpriv ? parseUser(spec.user) : undefined
  if (user === null) throw fail('engine_error', `unknown user ${JSON.stringify(spec.user)}`, { op: 'create' })
  await ensureBase()
  const id = randomBytes(32).toString('hex')
  const name = spec.name ?? `berth-${id.slice(0, 12)}`
  const workingDir = spec.workingDir ?? '/'
  const root = rootDir(baseDir, id)
  await mkdir(root, { recursive: true })
  await mkdir(join(root, 'root'), { recursive: true })
  await mkdir(join(root, 'tmp'), { recursive: true })
  await chmod(join(root, 'tmp'), 0o1777) // as an image's /tmp: every user's, sticky
  for (const m of spec.mounts ?? []) {
    const source = mountSource(baseDir, m)
    if (m.type === 'volume') await mkdir(source, { recursive: true })
    const target = hostPath(baseDir, id, m.target)
    await mkdir(dirname(target), { recursive: true })
    await rm(target, { recursive: true, force: true })
    if (sandbox.mode === 'none') {
      await symlink(source, target) // plain processes see the mount through the link
    } else if ((await stat(source)).isDirectory()) {
      await mkdir(target) // bwrap binds the source over this mount point
    } else {
      await writeFile(target, '')
    }
  }
  // After the mounts: a working directory inside one is made in its source; sandboxed, that
  // happens in the sandbox (below), as a reused volume may hold the agent's symlinks. One
  // outside every mount is made here, in the fresh root no agent has touched.
  const where = resolvePath(baseDir, { id, mounts: spec.mounts ?? [] }, workingDir)
  if (sandbox.mode === 'none' || where.startsWith(`${root}/`) || where === root) await mkdir(where, { recursive: true })
  const meta: LocalMeta = {
    id,
    name,
    image: spec.image,
    cmd: [...(spec.entrypoint ?? []), ...(spec.cmd ?? (spec.entrypoint ? [] : IDLE_COMMAND))],
    env: spec.env ?? {},
    workingDir,
    labels: { ...spec.labels, [MANAGED_LABEL]: 'true' },
    mounts: spec.mounts ?? [],
    state: 'created',
    createdAt: new Date().toISOString(),
    startedAt: null,
    finishedAt: null,
    exitCode: null,
    pid: null,
    pidStart: null,
    sandbox: sandbox.mode,
    ...(user && user.uid !== 0 && { user }),
  }
  const { diskBytes: _disk, tmpBytes, ...cgroupLimits } = spec.limits ?? {}
  // The workspace's size is its disk's (above), where the runtime has disks; /tmp's is a tmpfs where it can be.
  if (tmpBytes && sandbox.mode === 'bwrap' && (await mountScratch(baseDir, id, tmpBytes))) meta.tmpBytes = tmpBytes
  const limits = Object.fromEntries(Object.entries(cgroupLimits).filter(([, v]) => v !== undefined))
  if (cgroups && Object.keys(limits).length) {
    try {
      cgroups.create(id, limits)
    } catch (err) {
      if (meta.tmpBytes) await unmountScratch(baseDir, id)
      await rm(containerDir(baseDir, id), { recursive: true, force: true })
      throw fail('engine_error', `local create: cannot apply limits through cgroups: ${(err as Error).message}`, {
        op: 'create',
      })
    }
    meta.limits = limits
  }
  await writeMeta(baseDir, meta)
  if (sandbox.mode === 'bwrap') await makeWorkingDir(ctx, meta)
  if (sandbox.mode === 'none')
    logger.warn(NO_ISOLATION, {
      runtime: 'local',
      id,
      dir: containerDir(baseDir, id),
      ...(spec.limits ? { ignoredLimits: spec.limits } : {}),
      ...(spec.mounts?.some((m) => m.readOnly) ? { readOnlyMountsAreWritable: true } : {}),
    })
  return { id, name }
}

/**
 * Make the working directory, the container's user's when it has one, as root inside the
 * sandbox: a symlink the agent left in a reused workspace resolves in its own view, never
 * on the host.
 */
async function makeWorkingDir(ctx: LocalContext, meta: LocalMeta): Promise<void> {
  const owner = meta.user ? `${meta.user.uid}:${meta.user.gid}` : ''
  const script = 'mkdir -p -- "$1" && { [ -z "$2" ] || chown -- "$2" "$1"; }'
  const how = launch(ctx, meta, ['/bin/sh', '-c', script, 'sh', meta.workingDir, owner], '/', { user: ROOT })
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(how.file, how.args, { cwd: how.cwd, env: how.env, stdio: 'ignore' })
    child.once('error', () => resolve(null))
    child.once('close', resolve)
  })
  if (code !== 0) {
    await rm(containerDir(ctx.baseDir, meta.id), { recursive: true, force: true })
    if (meta.limits) await ctx.cgroups?.remove(meta.id)
    throw ctx.fail('engine_error', `local create: cannot make the working directory ${meta.workingDir}`, {
      op: 'create',
    })
  }
}
