/** The shared state of one local runtime: its base directory, sandbox, cgroups, and how a container's meta is loaded. */
import { access, constants, mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  ContainerError,
  jsonLogger,
  workspaceDisks,
  type DiskOptions,
  type Logger,
  type WorkspaceDisks,
} from '@berth/core'
import { detectCgroups, type Cgroups } from './cgroups.js'
import { readMeta, type LocalMeta } from './paths.js'
import { isAlive } from './processes.js'
import { detectSandbox, type Sandbox, type SandboxMode } from './sandbox.js'

/** Options of `localRuntime`. */
export interface LocalRuntimeOptions {
  /** Where containers live, one directory each (default `<tmpdir>/berth-local`). */
  baseDir?: string
  /** Receives the no-isolation warning on every create (default: JSON lines on stderr). */
  logger?: Logger
  /** How often a running exec checks the container's main process (default 250 ms). */
  watchIntervalMs?: number
  /**
   * How commands run: `bwrap` in a bubblewrap sandbox (throws when bwrap cannot work here),
   * `none` as plain host processes, `auto` (default) bwrap where it works, else none.
   */
  sandbox?: SandboxMode | 'auto'
  /**
   * Where `limits.diskBytes` workspaces and `sizeBytes` volumes are made: loop-mounted ext4
   * disks, as the engines' (needs root). Without it the workspace size is not enforced.
   */
  disks?: DiskOptions
}

/** What every part of the local runtime shares. */
export interface LocalContext {
  baseDir: string
  sandbox: Sandbox
  cgroups: Cgroups | null
  /** Sized workspace disks, when the runtime was given a disk directory. */
  disks: WorkspaceDisks | undefined
  /** One line on what is isolated. */
  description: string
  logger: Logger
  watchIntervalMs: number
  /** Exec process groups per container, to kill on stop/remove. */
  execs: Map<string, Set<number>>
  /** Exit waiters for main processes this runtime started. */
  exits: Map<string, Promise<void>>
  fail(reason: ContainerError['reason'], message: string, details?: Record<string, unknown>): ContainerError
  /** The base directory exists and is writable, else `unreachable` (the local "engine down"). */
  ensureBase(): Promise<void>
  /** A container's meta, refreshed; `not_found` when there is none. */
  load(id: string, op: string): Promise<LocalMeta>
  /** The meta with a main process that died behind our back marked exited. */
  refresh(meta: LocalMeta): LocalMeta
  /** Whether the container's processes run in bwrap (it was created so, and bwrap works here). */
  sandboxed(meta: LocalMeta): boolean
}

const BWRAP_ISOLATION =
  'bubblewrap sandbox: own mount, PID, IPC, UTS{user} namespaces, no capabilities; host system directories ' +
  'read-only, only the container directory writable; own network namespace (loopback only, egress through ' +
  "Berth's proxy); {uid}; {limits}"

/**
 * The context of a local runtime: detects the sandbox and cgroups once.
 *
 * @example
 * ```ts
 * const ctx = localContext({ baseDir: './.data/containers', sandbox: 'none' })
 * const meta = await ctx.load(id, 'inspect')
 * ```
 */
export function localContext(options: LocalRuntimeOptions): LocalContext {
  const baseDir = options.baseDir ?? join(tmpdir(), 'berth-local')
  const sandbox = detectSandbox(options.sandbox ?? 'auto')
  // Limits need the sandbox (a container sees its own cgroup there) and a writable cgroupfs.
  const cgroups = sandbox.mode === 'bwrap' ? detectCgroups() : null
  const description =
    sandbox.mode === 'bwrap'
      ? BWRAP_ISOLATION.replace('{user}', sandbox.userns ? ' and user' : '')
          .replace('{uid}', sandbox.setpriv ? 'agents as an unprivileged host uid' : "the server's uid")
          .replace(
            '{limits}',
            cgroups
              ? `memory, CPU and pids limits through cgroups v${cgroups.version}`
              : 'no resource limits (no writable cgroups here)',
          )
      : `NO ISOLATION (${sandbox.reason}): plain host processes`

  const fail = (reason: ContainerError['reason'], message: string, details: Record<string, unknown> = {}) =>
    new ContainerError(reason, message, { runtime: 'local', baseDir, ...details })

  const ensureBase = async () => {
    try {
      await mkdir(baseDir, { recursive: true })
      await access(baseDir, constants.W_OK)
    } catch (err) {
      throw fail('unreachable', `local runtime base directory ${baseDir} is unusable: ${(err as Error).message}`)
    }
  }

  const refresh = (meta: LocalMeta): LocalMeta => {
    if (meta.state === 'running' && !isAlive(meta.pid, meta.pidStart)) {
      return { ...meta, state: 'exited', finishedAt: meta.finishedAt ?? new Date().toISOString(), pid: null }
    }
    return meta
  }

  const load = async (id: string, op: string): Promise<LocalMeta> => {
    try {
      return refresh(await readMeta(baseDir, id))
    } catch (err) {
      await ensureBase() // an unusable base directory is the local "engine down"
      if ((err as NodeJS.ErrnoException).code === 'ENOENT')
        throw fail('not_found', `No such container: ${id}`, { op, id })
      throw err
    }
  }

  return {
    baseDir,
    sandbox,
    cgroups,
    disks: options.disks ? workspaceDisks(options.disks) : undefined,
    description,
    logger: options.logger ?? jsonLogger(),
    watchIntervalMs: options.watchIntervalMs ?? 250,
    execs: new Map(),
    exits: new Map(),
    fail,
    ensureBase,
    load,
    refresh,
    sandboxed: (meta) => meta.sandbox === 'bwrap' && sandbox.mode === 'bwrap',
  }
}
