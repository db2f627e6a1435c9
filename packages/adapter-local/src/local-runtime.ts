import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { access, constants, mkdir, readFile, readdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises'
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
import { startLocalExec } from './exec.js'
import { containerDir, hostPath, readMeta, rootDir, writeMeta, type LocalMeta } from './paths.js'
import { exitCodeOf, isAlive, processStartTime, residentBytes, signalGroup } from './processes.js'

/** Options of {@link localRuntime}. */
export interface LocalRuntimeOptions {
  /** Where containers live, one directory each (default `<tmpdir>/berth-local`). */
  baseDir?: string
  /** Receives the no-isolation warning on every create (default: JSON lines on stderr). */
  logger?: Logger
  /** How often a running exec checks the container's main process (default 250 ms). */
  watchIntervalMs?: number
}

const NO_ISOLATION =
  'local runtime: commands run as plain host processes with NO isolation (no namespaces, ' +
  'no resource limits, full access to the host as this user). Development only: use Docker or Podman for anything else.'

/**
 * The `local` runtime, for development on machines without a container engine: a
 * "container" is a directory (`<baseDir>/<id>/root` stands for its `/`) plus `meta.json`;
 * its main process and execs are host child processes run inside that directory. Paths
 * given to the API (working dir, archives, mounts) map under the root; absolute paths
 * *inside* commands still mean the host's. Nothing is isolated or limited, and every
 * create says so through `logger.warn`.
 *
 * @example
 * ```ts
 * const rt = localRuntime({ baseDir: './.data/containers' })
 * const { id } = await rt.create({ image: 'ignored', workingDir: '/workspace' })
 * await rt.start(id)
 * ```
 */
export const localRuntime = defineRuntime((options: LocalRuntimeOptions = {}): ContainerRuntime => {
  const baseDir = options.baseDir ?? join(tmpdir(), 'berth-local')
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

  const childEnv = (meta: LocalMeta): Record<string, string> => ({
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: hostPath(baseDir, meta.id, '/root'),
    ...meta.env,
  })

  const killAll = (id: string, meta: LocalMeta | null, signal: NodeJS.Signals) => {
    for (const pid of execs.get(id) ?? []) signalGroup(pid, signal)
    if (meta?.pid && isAlive(meta.pid, meta.pidStart)) signalGroup(meta.pid, signal)
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
    oomKilled: false,
    limits: {}, // nothing is enforced, so nothing is claimed
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
    capabilities: { isolation: false, limits: false },

    ping: ensureBase,

    async create(spec) {
      await ensureBase()
      const id = randomBytes(32).toString('hex')
      const name = spec.name ?? `berth-${id.slice(0, 12)}`
      const workingDir = spec.workingDir ?? '/'
      const root = rootDir(baseDir, id)
      await mkdir(hostPath(baseDir, id, workingDir), { recursive: true })
      await mkdir(join(root, 'root'), { recursive: true })
      await mkdir(join(root, 'tmp'), { recursive: true })
      for (const m of spec.mounts ?? []) {
        const source = m.type === 'volume' ? join(baseDir, 'volumes', m.source) : m.source
        if (m.type === 'volume') await mkdir(source, { recursive: true })
        const target = hostPath(baseDir, id, m.target)
        await mkdir(dirname(target), { recursive: true })
        await rm(target, { recursive: true, force: true })
        await symlink(source, target)
      }
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
      }
      await writeMeta(baseDir, meta)
      logger.warn(NO_ISOLATION, {
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
      const child = spawn(meta.cmd[0]!, meta.cmd.slice(1), {
        cwd: hostPath(baseDir, id, meta.workingDir),
        env: childEnv(meta),
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
    },

    async stop(id, opts = {}) {
      const meta = await load(id, 'stop')
      if (meta.state !== 'running') return
      killAll(id, meta, 'SIGTERM')
      if (!(await waitGone(meta, (opts.timeoutSeconds ?? 10) * 1000))) {
        killAll(id, meta, 'SIGKILL')
        await waitGone(meta, 2000)
      }
      await exits.get(id) // the exit handler records the exit code
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
    },

    async exec(id, opts) {
      const meta = await load(id, 'exec')
      if (meta.state !== 'running') {
        throw fail('not_running', `local container ${id} is not running`, { op: 'exec', id })
      }
      const cwd = hostPath(baseDir, id, opts.cwd ?? meta.workingDir)
      return startLocalExec(
        {
          id,
          cwd,
          env: childEnv(meta),
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
      await load(id, 'putArchive')
      const dir = hostPath(baseDir, id, path)
      const st = await stat(dir).catch(() => null)
      if (!st?.isDirectory()) throw fail('not_found', `Could not find the directory ${path} in ${id}`, { op: 'putArchive', id, path })
      const source =
        tar instanceof Uint8Array ? Readable.from([tar]) : (tar as AsyncIterable<Uint8Array>)
      await extractInto(dir, source)
    },

    async getArchive(id, path) {
      await load(id, 'getArchive')
      const abs = hostPath(baseDir, id, path)
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
      const pids = [meta.pid, ...(execs.get(id) ?? [])].filter((p): p is number => !!p && isAlive(p, null))
      return {
        memoryBytes: pids.reduce((sum, pid) => sum + residentBytes(pid), 0),
        memoryLimitBytes: null,
        pids: pids.length,
      }
    },
  }
})
