import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readdir, rename, rm, stat } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { posix } from 'node:path'
import {
  ContainerError,
  DISK_LABEL,
  defineRuntime,
  releaseDisk,
  execFileOperations,
  toWebStream,
  type ContainerInfo,
  type ContainerRuntime,
  type ContainerSummary,
  type FileOperations,
} from '@berth/core'
import { extractInto, packPath } from './archive.js'
import { startLocalExec } from './exec.js'
import { createContainer } from './local-create.js'
import { localContext, type LocalRuntimeOptions } from './local-context.js'
import { launch } from './local-launch.js'
import { portForwarders } from './port-forward.js'
import { unmountScratch } from './scratch-tmpfs.js'
import { localVolumes } from './local-volumes.js'
import { sandboxedGetArchive, sandboxedPutArchive } from './sandbox-archive.js'
import { ROOT } from './sandbox.js'
import { parseUser } from './users.js'
import { containerDir, readMeta, resolvePath, rootDir, writeMeta, type LocalMeta } from './paths.js'
import type { SandboxMode } from './sandbox.js'
import {
  descendantRuns,
  exitCodeOf,
  isAlive,
  killTree,
  processesWith,
  processStartTime,
  processTree,
  residentBytes,
  signalGroup,
} from './processes.js'

/** The local runtime, with what it isolates. */
export interface LocalRuntime extends ContainerRuntime {
  /** `bwrap` when commands run sandboxed, `none` when they are plain host processes. */
  readonly sandbox: SandboxMode
  /** One line on what is isolated, for start-up logs. */
  readonly description: string
}

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
  const ctx = localContext(options)
  const { baseDir, sandbox, cgroups, execs, exits, fail, ensureBase, load, refresh } = ctx
  const forwarders = portForwarders()
  const volumes = localVolumes(ctx)

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

  const rt: Omit<LocalRuntime, keyof FileOperations> = {
    name: 'local',
    sandbox: sandbox.mode,
    description: ctx.description,
    // Under bwrap every sandbox has an empty network namespace: `none` holds as is, and
    // `public`/`allowlist` hold because the only way out is the broker's egress proxy.
    capabilities: {
      isolation: sandbox.mode === 'bwrap',
      limits: cgroups !== null,
      ...(sandbox.setpriv && { unprivilegedUser: true }),
      egress: sandbox.mode === 'bwrap' ? ['none', 'public', 'allowlist'] : [],
      // Its sandboxes are this server's host processes, with their mounts: a clean stop ends them.
      outlivesServer: false,
    },

    ping: ensureBase,
    create: (spec) => createContainer(ctx, spec),
    createVolume: volumes.createVolume,
    listVolumes: volumes.listVolumes,
    removeVolume: volumes.removeVolume,

    async start(id) {
      const meta = await load(id, 'start')
      if (meta.state === 'running') return
      // The main process (an idle init) stays root, like an engine's: Berth's housekeeping, not the agent.
      const how = launch(ctx, meta, meta.cmd, meta.workingDir, { main: true, user: ROOT })
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
      if (ctx.sandboxed(meta)) await descendantRuns(started, 3)
    },

    async stop(id, opts = {}) {
      const meta = await load(id, 'stop')
      forwarders.closeFor(id)
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

    async remove(id) {
      let meta: LocalMeta | null = null
      let dir: string
      try {
        dir = containerDir(baseDir, id)
        meta = refresh(await readMeta(baseDir, id))
      } catch {
        return // not an id, or no such container: nothing to remove
      }
      forwarders.closeFor(id)
      if (meta?.tmpBytes) await unmountScratch(baseDir, id)
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
      // Its workspace disk, by its label: a runtime without disks (a restarted server) releases it too.
      const disk = meta?.labels[DISK_LABEL]
      if (disk) await releaseDisk(disk)
    },

    async exec(id, opts) {
      const meta = await load(id, 'exec')
      if (meta.state !== 'running') {
        throw fail('not_running', `local container ${id} is not running`, { op: 'exec', id })
      }
      const cwd = opts.cwd ?? meta.workingDir
      const user = opts.user !== undefined && sandbox.setpriv ? parseUser(opts.user) : undefined
      if (user === null) throw fail('engine_error', `unknown user ${JSON.stringify(opts.user)}`, { op: 'exec', id })
      return startLocalExec(
        {
          id,
          launch: (cmd, env) => launch(ctx, meta, cmd, cwd, { env, user }),
          watchIntervalMs: ctx.watchIntervalMs,
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
      const source = tar instanceof Uint8Array ? Readable.from([tar]) : (tar as AsyncIterable<Uint8Array>)
      if (ctx.sandboxed(meta)) return sandboxedPutArchive(ctx, meta, path, source)
      // Unsandboxed: host paths as this user (no boundary to keep; see the README).
      const dir = resolvePath(baseDir, meta, path)
      const st = await stat(dir).catch(() => null)
      if (!st?.isDirectory())
        throw fail('not_found', `Could not find the directory ${path} in ${id}`, { op: 'putArchive', id, path })
      await extractInto(dir, source)
    },

    async getArchive(id, path) {
      const meta = await load(id, 'getArchive')
      if (ctx.sandboxed(meta)) return sandboxedGetArchive(ctx, meta, path)
      const abs = resolvePath(baseDir, meta, path)
      if (!(await stat(abs).catch(() => null))) {
        throw fail('not_found', `Could not find the file ${path} in ${id}`, { op: 'getArchive', id, path })
      }
      // Named for the container path, as Docker does: a volume's host directory has another name.
      const p = packPath(abs, posix.basename(posix.normalize(`/${path}`)) || undefined)
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

    async close() {
      forwarders.closeAll()
      await volumes.unmountDisks()
    },

    async portTarget(id, port) {
      const meta = await load(id, 'portTarget')
      if (meta.state !== 'running') throw new ContainerError('not_running', `Container ${id} is not running`, { id })
      // Unsandboxed, the port would be the host's own loopback port: no previews there (no open proxy to the host).
      if (!ctx.sandboxed(meta)) return null
      // Each sandbox has its own network namespace: a forwarder inside the one that listens on the port.
      const pids = [...new Set(roots(id, meta).flatMap(processTree))]
      const socketPath = await forwarders.socketFor(id, pids, port)
      return socketPath ? { host: 'localhost', port, socketPath } : null
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
  // Files through the container's shell, like an engine's: paths resolve in its own view.
  return { ...rt, ...execFileOperations(rt) }
})
