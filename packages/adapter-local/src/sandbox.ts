import { spawnSync } from 'node:child_process'
import { accessSync, constants, lstatSync, readdirSync } from 'node:fs'
import { delimiter, dirname, join, posix } from 'node:path'
import type { ContainerMount } from '@berth/core'

/** How a local container's processes run: in a bubblewrap sandbox, or as plain host processes. */
export type SandboxMode = 'bwrap' | 'none'

/** What {@link detectSandbox} found. */
export interface Sandbox {
  mode: SandboxMode
  /** The `bwrap` binary (mode `bwrap`). */
  bwrap?: string
  /** True when bwrap may create a user namespace (then every capability is dropped, bounding set included). */
  userns?: boolean
  /**
   * The `setpriv` binary when the server is root: bwrap then runs without a user namespace
   * and each command is set to its own host uid (an unprivileged one for the agent) with
   * setpriv inside the sandbox, its capabilities bounded there.
   */
  setpriv?: string
  /** Why there is no sandbox (mode `none`). */
  reason?: string
}

/** The PATH every local container gets: the usual system directories plus the one holding this Node. */
export const CONTAINER_PATH = [
  ...new Set([
    '/usr/local/sbin',
    '/usr/local/bin',
    '/usr/sbin',
    '/usr/bin',
    '/sbin',
    '/bin',
    dirname(process.execPath),
  ]),
].join(':')

/** Host directories shown read-only in the sandbox (those that exist). */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']
/** The part of the host's /etc a program needs (users, DNS, TLS roots, the loader); no secrets. */
const ETC_FILES = [
  'passwd',
  'group',
  'hosts',
  'hostname',
  'resolv.conf',
  'nsswitch.conf',
  'host.conf',
  'gai.conf',
  'localtime',
  'timezone',
  'os-release',
  'debian_version',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'alternatives',
  'ssl',
  'ca-certificates',
  'ca-certificates.conf',
  'pki',
  'mime.types',
  'gitconfig',
  'protocols',
  'services',
].map((f) => `/etc/${f}`)
/** Container root entries never bound over the system view. */
const RESERVED = new Set(['usr', 'bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32', 'etc', 'proc', 'dev', 'sys', 'run'])

function findOnPath(bin: string, path = process.env.PATH ?? CONTAINER_PATH): string | null {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue
    try {
      accessSync(join(dir, bin), constants.X_OK)
      return join(dir, bin)
    } catch {
      // next
    }
  }
  return null
}

function probe(bwrap: string, userns: boolean): string | null {
  const args = [
    ...(userns ? ['--unshare-user'] : []),
    '--unshare-pid',
    '--ro-bind',
    '/',
    '/',
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    'true',
  ]
  const r = spawnSync(bwrap, args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 10_000 })
  if (r.status === 0) return null
  return (r.stderr?.toString().trim() || r.error?.message || `exit ${r.status}`).split('\n')[0]!
}

/**
 * Pick the sandbox for `wanted`: `auto` uses bubblewrap when it is installed and can create
 * namespaces here (probed once), else none; `bwrap` insists (throws when it cannot work);
 * `none` never sandboxes.
 *
 * @example
 * ```ts
 * detectSandbox('auto') // { mode: 'bwrap', bwrap: '/usr/bin/bwrap', userns: true }
 * ```
 */
export function detectSandbox(wanted: SandboxMode | 'auto'): Sandbox {
  if (wanted === 'none') return { mode: 'none', reason: 'disabled (sandbox: none)' }
  const bwrap = findOnPath('bwrap') ?? findOnPath('bwrap', CONTAINER_PATH)
  let why = 'bwrap is not installed (Debian: apt-get install bubblewrap)'
  if (bwrap) {
    // As root, a real unprivileged host uid per command beats root mapped into a user namespace.
    const setpriv = process.getuid?.() === 0 ? findOnPath('setpriv', CONTAINER_PATH) : null
    if (setpriv && probe(bwrap, false) === null) return { mode: 'bwrap', bwrap, userns: false, setpriv }
    const userFailure = probe(bwrap, true)
    if (userFailure === null) return { mode: 'bwrap', bwrap, userns: true }
    const plainFailure = probe(bwrap, false)
    if (plainFailure === null) return { mode: 'bwrap', bwrap, userns: false }
    why = `bwrap cannot create namespaces here: ${plainFailure}`
  }
  if (wanted === 'bwrap') throw new Error(`local runtime: sandbox 'bwrap' asked for, but ${why}`)
  return { mode: 'none', reason: why }
}

/** One local container as the sandbox needs it. */
export interface SandboxedContainer {
  id: string
  /** Host directory that is the container's `/`. */
  root: string
  /** Mounts with host sources (volumes already resolved to their directories). */
  mounts: ContainerMount[]
}

/** Who a sandboxed command runs as: a host uid and gid (root: `{ uid: 0, gid: 0 }`). */
export interface SandboxUser {
  uid: number
  gid: number
}

/** Root, for Berth's own commands in a container (its main process). */
export const ROOT: SandboxUser = { uid: 0, gid: 0 }

/**
 * Capabilities a root command keeps under a privileged sandbox (Docker's defaults, see
 * `@berth/adapter-docker`'s hardening): the runner starts the agent as its own user and
 * hands it files. Every other capability leaves the bounding set; a non-root command keeps none.
 */
const ROOT_CAPS = ['chown', 'dac_override', 'fowner', 'setuid', 'setgid', 'kill']

/**
 * The bwrap argument list that runs `cmd` in `cwd` inside the container: own mount, PID,
 * IPC, UTS (and, where allowed, user) namespaces; the host's system directories and a
 * small part of /etc read-only; the container root's own top-level directories (its
 * `/workspace`, `/tmp`, HOME `/root`, ...) writable at their paths; mounts on top (bind
 * read-only where asked); no capabilities; it dies with its parent. The network namespace
 * is always its own (loopback only): the agent reaches the model gateway and the egress
 * proxy through the broker's unix sockets, mounted in. Under a privileged sandbox
 * ({@link Sandbox.setpriv}) the command runs as `opts.user` (default: root, bounded to
 * {@link ROOT_CAPS}).
 *
 * @example
 * ```ts
 * bwrapArgs(sandbox, { id, root, mounts: [] }, ['sh', '-c', 'pwd'], '/workspace')
 * // ['--die-with-parent', '--new-session', '--unshare-user', ..., '--chdir', '/workspace', '--', 'sh', '-c', 'pwd']
 * ```
 */
export function bwrapArgs(
  sandbox: Sandbox,
  c: SandboxedContainer,
  cmd: string[],
  cwd: string,
  opts: { cgroupBinds?: [string, string][]; user?: SandboxUser } = {},
): string[] {
  const args = [
    '--die-with-parent',
    '--new-session',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    '--unshare-net',
  ]
  if (sandbox.userns) args.push('--unshare-user')
  args.push('--cap-drop', 'ALL', '--hostname', c.id.slice(0, 12))
  // setpriv needs these to switch uid and bound the set; it drops them before the command runs.
  if (sandbox.setpriv) for (const cap of [...ROOT_CAPS, 'setpcap']) args.push('--cap-add', `CAP_${cap.toUpperCase()}`)
  for (const dir of SYSTEM_DIRS) args.push('--ro-bind-try', dir, dir)
  // Made readable for every uid: a privileged bwrap creates it 0700 (bwrap >= 0.5 has --perms).
  args.push('--perms', '0755', '--dir', '/etc')
  for (const file of ETC_FILES) args.push('--ro-bind-try', file, file)
  // Node's install, when it lives outside /usr (nvm, /opt/node): the runner needs it.
  const nodePrefix = dirname(dirname(process.execPath))
  if (!SYSTEM_DIRS.some((d) => nodePrefix === d || nodePrefix.startsWith(`${d}/`)))
    args.push('--ro-bind-try', nodePrefix, nodePrefix)
  args.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/run')
  // The container's own cgroup (its limits) where an engine's container sees it.
  for (const [host, target] of opts.cgroupBinds ?? []) args.push('--ro-bind', host, target)
  for (const entry of readdirSync(c.root).sort()) {
    // Real directories only: a symlink placed at the top of the root must not expose its host target.
    if (RESERVED.has(entry) || !lstatSync(join(c.root, entry)).isDirectory()) continue
    args.push('--bind', join(c.root, entry), `/${entry}`)
  }
  const mounts = [...c.mounts].sort((a, b) => depth(a.target) - depth(b.target))
  for (const m of mounts) args.push(m.readOnly ? '--ro-bind' : '--bind', m.source, posix.normalize(m.target))
  args.push('--chdir', cwd, '--', ...(sandbox.setpriv ? asUser(sandbox.setpriv, opts.user) : []), ...cmd)
  return args
}

/** The setpriv prefix that runs a command as `user` (root: with {@link ROOT_CAPS} only). */
function asUser(setpriv: string, user: SandboxUser = { uid: 0, gid: 0 }): string[] {
  const ids = user.uid === 0 ? [] : ['--reuid', String(user.uid), '--regid', String(user.gid), '--clear-groups']
  const bounding = user.uid === 0 ? `-all,${ROOT_CAPS.map((c) => `+${c}`).join(',')}` : '-all'
  return [setpriv, ...ids, '--bounding-set', bounding, '--inh-caps', '-all', '--']
}

function depth(p: string): number {
  return posix.normalize(p).split('/').filter(Boolean).length
}

/**
 * `argv` under a keeper shell that waits for it: the keeper (not the server) is the
 * sandbox's parent, so a container's main process outlives a server restart like an
 * engine's container, while killing the keeper still takes the sandbox (it dies with its
 * parent). The keeper exits with the command's status.
 *
 * @example
 * ```ts
 * kept(['bwrap', '--die-with-parent', '--', 'sleep', 'infinity'])
 * // ['/bin/sh', '-c', '"$@" & wait $!', 'sh', 'bwrap', '--die-with-parent', '--', 'sleep', 'infinity']
 * ```
 */
export function kept(argv: string[]): string[] {
  return ['/bin/sh', '-c', '"$@" & wait $!', 'sh', ...argv]
}
