import { spawn } from 'node:child_process'
import { lstatSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { access, constants, lstat, mkdir, readFile, readdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { Readable } from 'node:stream'
import {
  ContainerError,
  IDLE_COMMAND,
  MANAGED_LABEL,
  defineRuntime,
  toWebStream,
  jsonLogger,
  type ContainerInfo,
  type ContainerRuntime,
  type ContainerSummary,
  type Logger,
} from '@berth/core'
import { extractInto, packPath } from './archive.js'
import { startLocalExec, type Launch } from './exec.js'
import { containerDir, hostPath, mountSource, readMeta, resolvePath, rootDir, writeMeta, type LocalMeta } from './paths.js'
import { detectCgroups, inCgroups } from './cgroups.js'
import { bwrapArgs, CONTAINER_PATH, detectSandbox, kept, type SandboxMode } from './sandbox.js'
import { descendantRuns, exitCodeOf, isAlive, killTree, processesWith, processStartTime, processTree, residentBytes, signalGroup } from './processes.js'

/** Options of {@link localRuntime}. */
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
}

/** The local runtime, with what it isolates. */
export interface LocalRuntime extends ContainerRuntime {
  /** `bwrap` when commands run sandboxed, `none` when they are plain host processes. */
  readonly sandbox: SandboxMode
  /** One line on what is isolated, for start-up logs. */
  readonly description: string
}

const NO_ISOLATION =
  'local runtime: commands run as plain host processes with NO isolation (no namespaces, ' +
  'no resource limits, full access to the host as this user). Development only: use Docker or Podman for anything else.'
const BWRAP_ISOLATION =
  'bubblewrap sandbox: own mount, PID, IPC, UTS{user} namespaces, no capabilities; host system directories ' +
  'read-only, only the container directory writable; host network; {limits}'

/**
 * The `local` runtime, for machines without a container engine: a "container" is a
 * directory (`<baseDir>/<id>/root` stands for its `/`) plus `meta.json`; its main process
 * and execs are host child processes with a scrubbed environment (PATH, HOME, LANG and
 * the container's env only), each in its own process group.
 *
 * Where bubblewrap works (`sandbox: 'auto'`, the default), every process runs in a bwrap
 * sandbox that shows the container's directories at their container paths (`/workspace`,
 * `/tmp`, HOME `/root`, mounts, read-only where asked) over a read-only view of the host's
 * system directories, with its own mount, PID, IPC, UTS and user namespaces and no
 * capabilities (see {@link bwrapArgs}). Without it, commands run as plain host processes
 * in the container directory: API paths map under the root, absolute arguments naming
 * something in the container are rewritten to their host paths, `BERTH_CONTAINER_ROOT`
 * tells the agent runner where its `/` is, and every create warns that nothing is isolated.
 * Resource limits (memory with swap capped alike, CPU quota, pids) are enforced through a
 * cgroup per container where the sandbox runs and the host's cgroupfs is writable (v1, or
 * v2 with the controllers delegated); elsewhere `capabilities.limits` is false and
 * `inspect` claims none.
 *
 * @example
 * ```ts
 * const rt = localRuntime({ baseDir: './.data/containers' })
 * const { id } = await rt.create({ image: 'ignored', workingDir: '/workspace' })
 * await rt.start(id)
 * ```
 */
export const localRuntime = defineRuntime((options: LocalRuntimeOptions = {}): LocalRuntime => {
  const baseDir = options.baseDir ?? join(tmpdir(), 'berth-local')
  const sandbox = detectSandbox(options.sandbox ?? 'auto')
  // Limits need the sandbox (a container sees its own cgroup there) and a writable cgroupfs.
  const cgroups = sandbox.mode === 'bwrap' ? detectCgroups() : null
  const description =
    sandbox.mode === 'bwrap'
      ? BWRAP_ISOLATION.replace('{user}', sandbox.userns ? ' and user' : '').replace(
          '{limits}',
          cgroups ? `memory, CPU and pids limits through cgroups v${cgroups.version}` : 'no resource limits (no writable cgroups here)',
        )
      : `NO ISOLATION (${sandbox.reason}): plain host processes`
  const logger = options.logger ?? jsonLogger()
  const watchIntervalMs = options.watchIntervalMs ?? 250
  /** Exec process groups per container, to kill on stop/remove. */
  const execs = new Map<string, Set<number>>()
  /** Exit waiters for main processes this runtime started. */
  const exits = new Map<string, Promise<void>>()

  const fail = (reason: ContainerError['reason'], message: string, details: Record<string, unknown> = {}) =>
    new ContainerError(reason, message, { runtime: 'local', baseDir, ...details })
  const checkVolumeName = (name: string) => {
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name)) throw fail('engine_error', `invalid volume name ${JSON.stringify(name)}`)
  }

  const ensureBase = async () => {
    try {
      await mkdir(baseDir, { recursive: true })
      await access(baseDir, constants.W_OK)
    } catch (err) {
      throw fail('unreachable', `local runtime base directory ${baseDir} is unusable: ${(err as Error).message}`)
    }
  }

  const load = async (id: string, op: string): Promise<LocalMeta> => {
    try {
      return refresh(await readMeta(baseDir, id))
    } catch (err) {
      await ensureBase() // an unusable base directory is the local "engine down"
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw fail('not_found', `No such container: ${id}`, { op, id })
      throw err
    }
  }

  /** The meta with a main process that died behind our back marked exited. */
  const refresh = (meta: LocalMeta): LocalMeta => {
    if (meta.state === 'running' && !isAlive(meta.pid, meta.pidStart)) {
      return { ...meta, state: 'exited', finishedAt: meta.finishedAt ?? new Date().toISOString(), pid: null }
    }
    return meta
  }

  /** Whether the container's processes run in bwrap (it was created so, and bwrap works here). */
  const sandboxed = (meta: LocalMeta) => meta.sandbox === 'bwrap' && sandbox.mode === 'bwrap'

  /**
   * How a command of the container starts: inside its sandbox (container paths as they
   * are), or as a plain host process (container paths mapped to host paths). The env never
   * inherits the server's: a minimal PATH/HOME/LANG, then the container's and the exec's.
   */
  const launch = (meta: LocalMeta, cmd: string[], cwd: string, extraEnv: Record<string, string> = {}, main = false): Launch => {
    const root = rootDir(baseDir, meta.id)
    if (sandboxed(meta)) {
      const mounts = meta.mounts.map((m) => ({ ...m, source: mountSource(baseDir, m) }))
      const cgroup = meta.limits && cgroups ? cgroups.of(meta.id) : null
      const sandboxed = [
        sandbox.bwrap!,
        ...bwrapArgs(sandbox, { id: meta.id, root, mounts, network: meta.network }, cmd, cwd, cgroup ? { cgroupBinds: cgroup.binds } : {}),
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
    const [file, ...args] = cmd.map((arg) => hostArg(meta, arg))
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
  const hostArg = (meta: LocalMeta, arg: string): string => {
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

  /** The container's process groups: its main process (while it is the one we started) and its execs. */
  const roots = (id: string, meta: LocalMeta | null): number[] => [
    ...(execs.get(id) ?? []),
    ...(meta?.pid && isAlive(meta.pid, meta.pidStart) ? [meta.pid] : []),
  ]
  /**
   * SIGTERM to the groups (a stop); SIGKILL to the groups and every descendant (sandboxes
   * run in sessions of their own), and to any sandbox of the container that lost its parent
   * (killed while it was still setting up, before it could tie its life to its parent's).
   */
  const killAll = (id: string, meta: LocalMeta | null, signal: 'SIGTERM' | 'SIGKILL', root = rootDir(baseDir, id)) => {
    for (const pid of roots(id, meta)) {
      if (signal === 'SIGKILL') killTree(pid)
      else signalGroup(pid, signal)
    }
    if (signal === 'SIGKILL' && sandbox.mode === 'bwrap') for (const pid of processesWith(`${root}/`)) killTree(pid)
  }

  const waitGone = async (meta: LocalMeta, ms: number) => {
    const until = Date.now() + ms
    while (Date.now() < until && isAlive(meta.pid, meta.pidStart)) await new Promise((r) => setTimeout(r, 25))
    return !isAlive(meta.pid, meta.pidStart)
  }

  const toInfo = (m: LocalMeta): ContainerInfo => ({
    id: m.id,
    name: m.name,
    image: m.image,
    state: m.state,
    running: m.state === 'running',
    exitCode: m.state === 'exited' ? m.exitCode : null,
    labels: m.labels,
    createdAt: m.createdAt,
    startedAt: m.startedAt,
    finishedAt: m.state === 'exited' ? m.finishedAt : null,
    oomKilled: !!(m.limits && cgroups?.oomKilled(m.id)),
    limits: m.limits ?? {}, // only what the container's cgroup enforces
  })
  const toSummary = (m: LocalMeta): ContainerSummary => ({
    id: m.id,
    name: m.name,
    image: m.image,
    state: m.state,
    labels: m.labels,
    createdAt: m.createdAt,
  })

  return {
    name: 'local',
    sandbox: sandbox.mode,
    description,
    // bwrap can only cut the network entirely (an empty namespace); it has no firewall.
    capabilities: { isolation: sandbox.mode === 'bwrap', limits: cgroups !== null, egress: sandbox.mode === 'bwrap' ? ['none'] : [] },

    ping: ensureBase,

    async create(spec) {
      // Fail closed: a policy this runtime cannot enforce is refused, not ignored.
      if (spec.egress && (spec.egress.policy !== 'none' || sandbox.mode !== 'bwrap')) {
        throw fail('engine_error', `the local runtime cannot enforce the ${spec.egress.policy} network policy${sandbox.mode === 'bwrap' ? ' (bubblewrap can only cut the network: use policy none, or Docker/Podman)' : ' (no bubblewrap sandbox)'}`, { op: 'create' })
      }
      await ensureBase()
      const id = randomBytes(32).toString('hex')
      const name = spec.name ?? `berth-${id.slice(0, 12)}`
      const workingDir = spec.workingDir ?? '/'
      const root = rootDir(baseDir, id)
      await mkdir(root, { recursive: true })
      await mkdir(join(root, 'root'), { recursive: true })
      await mkdir(join(root, 'tmp'), { recursive: true })
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
      // After the mounts: a working directory inside one is made in its source.
      await mkdir(resolvePath(baseDir, { id, mounts: spec.mounts ?? [] }, workingDir), { recursive: true })
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
        ...(spec.network && { network: spec.network }),
        ...(spec.egress && { network: 'none' }),
      }
      const limits = Object.fromEntries(Object.entries(spec.limits ?? {}).filter(([, v]) => v !== undefined))
      if (cgroups && Object.keys(limits).length) {
        try {
          cgroups.create(id, limits)
        } catch (err) {
          await rm(containerDir(baseDir, id), { recursive: true, force: true })
          throw fail('engine_error', `local create: cannot apply limits through cgroups: ${(err as Error).message}`, { op: 'create' })
        }
        meta.limits = limits
      }
      await writeMeta(baseDir, meta)
      if (sandbox.mode === 'none') logger.warn(NO_ISOLATION, {
        runtime: 'local',
        id,
        dir: containerDir(baseDir, id),
        ...(spec.limits ? { ignoredLimits: spec.limits } : {}),
        ...(spec.mounts?.some((m) => m.readOnly) ? { readOnlyMountsAreWritable: true } : {}),
      })
      return { id, name }
    },

    async start(id) {
      const meta = await load(id, 'start')
      if (meta.state === 'running') return
      const how = launch(meta, meta.cmd, meta.workingDir, {}, true)
      const child = spawn(how.file, how.args, {
        cwd: how.cwd,
        env: how.env,
        detached: true,
        stdio: 'ignore',
      })
      const started = await new Promise<number>((resolve, reject) => {
        child.once('spawn', () => resolve(child.pid!))
        child.once('error', reject)
      }).catch((err: Error) => {
        throw fail('engine_error', `local start ${id}: ${err.message}`, { op: 'start', id })
      })
      child.unref()
      exits.set(
        id,
        new Promise<void>((resolve) => {
          child.once('exit', (code, signal) => {
            void readMeta(baseDir, id)
              .then((m) =>
                m.pid === started
                  ? writeMeta(baseDir, {
                      ...m,
                      state: 'exited',
                      exitCode: exitCodeOf(code, signal),
                      finishedAt: new Date().toISOString(),
                      pid: null,
                    })
                  : undefined,
              )
              .catch(() => {}) // removed meanwhile
              .finally(resolve)
          })
        }),
      )
      await writeMeta(baseDir, {
        ...meta,
        state: 'running',
        startedAt: new Date().toISOString(),
        finishedAt: null,
        exitCode: null,
        pid: started,
        pidStart: processStartTime(started),
      })
      // Like an engine's start: back once the command runs (keeper → bwrap → init → command),
      // so an exec right after cannot take the resources its sandbox still needs.
      if (sandboxed(meta)) await descendantRuns(started, 3)
    },

    async stop(id, opts = {}) {
      const meta = await load(id, 'stop')
      if (meta.state !== 'running') return
      killAll(id, meta, 'SIGTERM')
      if (!(await waitGone(meta, (opts.timeoutSeconds ?? 10) * 1000))) {
        killAll(id, meta, 'SIGKILL')
        await waitGone(meta, 2000)
      }
      killAll(id, meta, 'SIGKILL') // whatever the SIGTERM left (and sandboxes orphaned mid-setup)
      // The exit handler records the exit code (bounded: a reaped zombie may have been missed).
      await Promise.race([exits.get(id), new Promise((r) => setTimeout(r, 2000))])
      const after = refresh(await readMeta(baseDir, id))
      if (after.state === 'running' || after.pid !== null) {
        await writeMeta(baseDir, { ...after, state: 'exited', pid: null, finishedAt: new Date().toISOString() })
      }
    },

    async createVolume(name, opts = {}) {
      checkVolumeName(name)
      await mkdir(join(baseDir, 'volumes', name), { recursive: true })
      // Labels beside the volumes (a volume's own directory is the workspace's files).
      const labelFile = join(baseDir, 'volume-labels', `${name}.json`)
      if (await access(labelFile).then(() => false, () => true)) {
        await mkdir(dirname(labelFile), { recursive: true })
        await writeFile(labelFile, JSON.stringify({ ...opts.labels, [MANAGED_LABEL]: 'true' }))
      }
    },

    async listVolumes(filter = {}) {
      await ensureBase()
      const dir = join(baseDir, 'volume-labels')
      const out: { name: string; labels: Record<string, string> }[] = []
      for (const file of await readdir(dir).catch(() => [] as string[])) {
        const labels = JSON.parse(await readFile(join(dir, file), 'utf8').catch(() => '{}')) as Record<string, string>
        const ok = Object.entries(filter.labels ?? {}).every(([k, v]) => (v === true ? k in labels : labels[k] === v))
        if (ok && file.endsWith('.json')) out.push({ name: file.slice(0, -'.json'.length), labels })
      }
      return out
    },

    async removeVolume(name) {
      checkVolumeName(name)
      await rm(join(baseDir, 'volumes', name), { recursive: true, force: true })
      await rm(join(baseDir, 'volume-labels', `${name}.json`), { force: true })
    },

    async remove(id) {
      let meta: LocalMeta | null = null
      let dir: string
      try {
        dir = containerDir(baseDir, id)
        meta = refresh(await readMeta(baseDir, id))
      } catch {
        return // not an id, or no such container: nothing to remove
      }
      // Move the directory aside first (atomic), so an exit handler that races us cannot
      // write meta.json back into it; then kill, then delete.
      const tomb = `${dir}.removing-${randomBytes(4).toString('hex')}`
      try {
        await rename(dir, tomb)
      } catch {
        return // removed concurrently
      }
      killAll(id, meta, 'SIGKILL')
      execs.delete(id)
      exits.delete(id)
      await rm(tomb, { recursive: true, force: true, maxRetries: 3 })
      if (meta?.limits) await cgroups?.remove(id)
    },

    async exec(id, opts) {
      const meta = await load(id, 'exec')
      if (meta.state !== 'running') {
        throw fail('not_running', `local container ${id} is not running`, { op: 'exec', id })
      }
      const cwd = opts.cwd ?? meta.workingDir
      return startLocalExec(
        {
          id,
          launch: (cmd, env) => launch(meta, cmd, cwd, env),
          watchIntervalMs,
          checkDead: async () => {
            try {
              const m = refresh(await readMeta(baseDir, id))
              return m.state === 'running' ? null : 'died'
            } catch {
              return 'was removed'
            }
          },
          track: (pid) => {
            const set = execs.get(id) ?? new Set<number>()
            execs.set(id, set.add(pid))
            return () => set.delete(pid)
          },
        },
        opts,
      )
    },

    async putArchive(id, path, tar) {
      const meta = await load(id, 'putArchive')
      const dir = resolvePath(baseDir, meta, path)
      const st = await stat(dir).catch(() => null)
      if (!st?.isDirectory()) throw fail('not_found', `Could not find the directory ${path} in ${id}`, { op: 'putArchive', id, path })
      const source =
        tar instanceof Uint8Array ? Readable.from([tar]) : (tar as AsyncIterable<Uint8Array>)
      await extractInto(dir, source)
    },

    async getArchive(id, path) {
      const meta = await load(id, 'getArchive')
      const abs = resolvePath(baseDir, meta, path)
      if (!(await stat(abs).catch(() => null))) {
        throw fail('not_found', `Could not find the file ${path} in ${id}`, { op: 'getArchive', id, path })
      }
      const p = packPath(abs)
      return toWebStream(p as unknown as AsyncIterable<Uint8Array>, () => p.destroy())
    },

    async list(filter = {}) {
      await ensureBase()
      const out: ContainerSummary[] = []
      for (const entry of await readdir(baseDir)) {
        let meta: LocalMeta
        try {
          meta = refresh(await readMeta(baseDir, entry))
        } catch {
          continue // volumes/, or a half-removed container
        }
        if (filter.all === false && meta.state !== 'running') continue
        const labels = filter.labels ?? {}
        const ok = Object.entries(labels).every(([k, v]) => (v === true ? k in meta.labels : meta.labels[k] === v))
        if (ok) out.push(toSummary(meta))
      }
      return out
    },

    async inspect(id) {
      return toInfo(await load(id, 'inspect'))
    },

    async stats(id) {
      const meta = await load(id, 'stats')
      const roots = [meta.pid, ...(execs.get(id) ?? [])].filter((p): p is number => !!p && isAlive(p, null))
      const pids = [...new Set(roots.flatMap(processTree))]
      const fromCgroup = meta.limits ? cgroups?.memoryBytes(id) : null
      return {
        memoryBytes: fromCgroup ?? pids.reduce((sum, pid) => sum + residentBytes(pid), 0),
        memoryLimitBytes: meta.limits?.memoryBytes ?? null,
        pids: pids.length,
      }
    },
  }
})
