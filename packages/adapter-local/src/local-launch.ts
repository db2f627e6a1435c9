/** How a local container's command starts: inside its bubblewrap sandbox, or as a plain host process. */
import { lstatSync } from 'node:fs'
import { inCgroups } from './cgroups.js'
import type { Launch } from './exec.js'
import type { LocalContext } from './local-context.js'
import { hostPath, mountSource, resolvePath, rootDir, type LocalMeta } from './paths.js'
import { bwrapArgs, CONTAINER_PATH, kept, type SandboxUser } from './sandbox.js'

/** How one command starts, beyond its argv and working directory. */
export interface LaunchOptions {
  /** Added to the container's env. */
  env?: Record<string, string>
  /** The container's main process: kept under a keeper that outlives the server. */
  main?: boolean
  /** Who it runs as in a privileged sandbox (default: the container's user, else root). */
  user?: SandboxUser | undefined
}

/**
 * How a command of the container starts: inside its sandbox (container paths as they
 * are), or as a plain host process (container paths mapped to host paths). The env never
 * inherits the server's: a minimal PATH/HOME/LANG, then the container's and the exec's.
 *
 * @example
 * ```ts
 * const how = launch(ctx, meta, ['sh', '-c', 'echo hi'], '/workspace')
 * spawn(how.file, how.args, { cwd: how.cwd, env: how.env })
 * ```
 */
export function launch(
  ctx: LocalContext,
  meta: LocalMeta,
  cmd: string[],
  cwd: string,
  opts: LaunchOptions = {},
): Launch {
  const { env: extraEnv = {}, main = false } = opts
  const { baseDir, sandbox, cgroups } = ctx
  const root = rootDir(baseDir, meta.id)
  if (ctx.sandboxed(meta)) {
    const mounts = meta.mounts.map((m) => ({ ...m, source: mountSource(baseDir, m) }))
    const cgroup = meta.limits && cgroups ? cgroups.of(meta.id) : null
    const sandboxed = [
      sandbox.bwrap!,
      ...bwrapArgs(sandbox, { id: meta.id, root, mounts }, cmd, cwd, {
        ...(cgroup && { cgroupBinds: cgroup.binds }),
        user: opts.user ?? meta.user,
      }),
    ]
    // Execs die with the server; the main process stays (under its keeper) for the next start to adopt.
    const argv = main ? kept(sandboxed) : sandboxed
    const [file, ...rest] = cgroup ? inCgroups(cgroup.procs, argv) : argv
    return {
      file: file!,
      args: rest,
      cwd: root,
      env: { PATH: CONTAINER_PATH, HOME: '/root', LANG: 'C.UTF-8', ...meta.env, ...extraEnv },
    }
  }
  const [file, ...args] = cmd.map((arg) => hostArg(baseDir, meta, arg))
  return {
    file: file!,
    args,
    cwd: resolvePath(baseDir, meta, cwd),
    env: {
      PATH: CONTAINER_PATH,
      HOME: hostPath(baseDir, meta.id, '/root'),
      TMPDIR: hostPath(baseDir, meta.id, '/tmp'),
      LANG: 'C.UTF-8',
      ...meta.env,
      ...extraEnv,
      BERTH_CONTAINER_ROOT: root,
    },
  }
}

/** Unsandboxed: an absolute argument naming something in the container becomes its host path. */
function hostArg(baseDir: string, meta: LocalMeta, arg: string): string {
  if (!arg.startsWith('/') || arg.startsWith('//')) return arg
  const top = arg.split('/')[1]
  if (!top) return arg
  const covered = meta.mounts.some((m) => arg === m.target || arg.startsWith(`${m.target.replace(/\/$/, '')}/`))
  try {
    if (covered || lstatSync(hostPath(baseDir, meta.id, `/${top}`))) return resolvePath(baseDir, meta, arg)
  } catch {
    // not in the container: the host's path
  }
  return arg
}
