/** Which container runtime Berth runs tasks on: the engine that answers, or `local`. */
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import {
  connectEngine,
  type DiskOptions,
  dockerRuntime,
  type EngineConnectionOptions,
  engineUrlOptions,
} from '@berth/adapter-docker'
import { localRuntime } from '@berth/adapter-local'
import { discoverPodman, podmanRuntime } from '@berth/adapter-podman'
import { sweepOrphanDisks, tidyOldDisks, type ContainerRuntime } from '@berth/core'
import { answerSync } from './engine-probe.js'

/** A runtime by name: `auto` takes the first engine that answers (Docker, then Podman), else `local`. */
export type RuntimeName = 'auto' | 'docker' | 'podman' | 'local'

/** The container runtime chosen, and a description safe to log. */
export interface ChosenRuntime {
  runtime: ContainerRuntime
  name: 'docker' | 'podman' | 'local'
  /** e.g. `podman (unix:///run/podman/podman.sock, rootful)`. */
  description: string
}

const DOCKER_SOCKET = '/var/run/docker.sock'

/** How long an engine gets to answer its ping before it counts as down. */
const PING_TIMEOUT_MS = 3_000

export const NO_ISOLATION_WARNING = [
  '',
  '!!! WARNING: NO CONTAINER ISOLATION !!!',
  '!!! Runtime `local`: tasks run as plain processes on this host, as this user, with full',
  '!!! access to its files and network and no resource limits. Development only. Start Docker',
  '!!! or Podman (or set BERTH_RUNTIME=docker|podman) for anything else.',
  '',
].join('\n')

interface Candidate {
  name: 'docker' | 'podman'
  connection: EngineConnectionOptions
  make(): ChosenRuntime
}

function docker(env: NodeJS.ProcessEnv, disks: DiskOptions | undefined): Candidate {
  // Docker's default socket named explicitly: dockerode's own default is a lazy lookup
  // that cannot be printed. DOCKER_HOST (with its TLS variables) is read the docker CLI's way.
  const connection = env.DOCKER_HOST ? engineUrlOptions(env.DOCKER_HOST, env) : { socketPath: DOCKER_SOCKET }
  return {
    name: 'docker',
    connection,
    make() {
      const { docker: client, endpoint } = connectEngine(connection)
      return { runtime: dockerRuntime({ docker: client, disks }), name: 'docker', description: `docker (${endpoint})` }
    },
  }
}

function podman(env: NodeJS.ProcessEnv, disks: DiskOptions | undefined): Candidate {
  const found = discoverPodman({ env })
  return {
    name: 'podman',
    connection: found.connection,
    make() {
      const { docker: client, endpoint } = connectEngine(found.connection)
      return {
        runtime: podmanRuntime({ docker: client, disks }),
        name: 'podman',
        description: `podman (${endpoint}, ${found.source})`,
      }
    },
  }
}

/** Why `local` refuses to start without bubblewrap, and the ways out. */
function noSandbox(reason: string, explicit: boolean): Error {
  const optOut =
    'to run agents as plain host processes with NO isolation, set BERTH_RUNTIME=local and BERTH_LOCAL_UNSANDBOXED=true'
  return new Error(
    explicit
      ? `BERTH_RUNTIME=local, but the local runtime cannot sandbox agents here (${reason}). Install bubblewrap (apt-get install bubblewrap), or ${optOut}.`
      : `No container engine answers and the local runtime cannot sandbox agents here (${reason}). Start Docker or Podman or install bubblewrap (apt-get install bubblewrap), or ${optOut}.`,
  )
}

/**
 * The local runtime: sandboxed by bubblewrap where it works (one calm line). Without a
 * sandbox it runs only when the operator asked for `local` explicitly and accepted running
 * unsandboxed (`BERTH_LOCAL_UNSANDBOXED=true`), with the loud warning; otherwise it throws.
 *
 * @example
 * ```ts
 * const chosen = localFor({ dataDir: './.data', localUnsandboxed: false }, console.warn, { explicit: true })
 * ```
 */
export function localFor(
  config: { dataDir: string; localUnsandboxed?: boolean | undefined; diskDir?: string | null | undefined },
  warn: (message: string) => void,
  opts: { explicit: boolean; make?: typeof localRuntime },
): ChosenRuntime {
  const baseDir = join(config.dataDir, 'containers')
  // Sized where the server runs as root, as for the engines (the note is theirs: /tmp is not sized here without root).
  const { disks } = disksFor(config.diskDir === undefined ? join(config.dataDir, 'disks') : config.diskDir)
  const runtime = (opts.make ?? localRuntime)({ baseDir, ...(disks && { disks }) })
  if (runtime.sandbox === 'none') {
    if (!opts.explicit || !config.localUnsandboxed) throw noSandbox(runtime.description, opts.explicit)
    warn(NO_ISOLATION_WARNING)
    return { runtime, name: 'local', description: `local (${baseDir}, NO ISOLATION)` }
  }
  warn(`berth: runtime local: tasks run in a ${runtime.description}.`)
  sweepAtStart(runtime, disks, warn)
  return { runtime, name: 'local', description: `local (${baseDir}, bubblewrap sandbox)` }
}

/**
 * In the background: take ext4's `lost+found` out of the workspaces of mounted disks an
 * earlier version made (the containers and volumes this start adopts keep them mounted), and
 * release the disks a killed server left under the disk directory (made, never handed to a
 * container or volume). Safe while this server starts and while other instances run on the
 * same engine: only disks older than the sweep's grace period go.
 */
function sweepAtStart(runtime: ContainerRuntime, disks: DiskOptions | undefined, warn: (message: string) => void) {
  if (!disks) return
  const logger = {
    info: (message: string, fields?: Record<string, unknown>) => warn(`berth: ${message}: ${JSON.stringify(fields)}`),
    warn: (message: string, fields?: Record<string, unknown>) => warn(`berth: ${message}: ${JSON.stringify(fields)}`),
  }
  tidyOldDisks(disks.dir)
    .then(() => sweepOrphanDisks({ ...disks, runtime, logger }))
    .catch((err: unknown) => warn(`berth: could not sweep orphan disks in ${disks.dir}: ${String(err)}`))
}

/** Options of {@link chooseRuntime}. */
export interface ChooseRuntimeOptions {
  /** Default `auto`. */
  runtime?: RuntimeName
  /** The `local` runtime keeps its containers under `<dataDir>/containers`. */
  dataDir: string
  /** Where the fallback to `local` and its isolation are announced (default `console.warn`). */
  warn?: (message: string) => void
  /** `DOCKER_HOST` and its TLS variables, `CONTAINER_HOST`, `XDG_RUNTIME_DIR` (default `process.env`). */
  env?: NodeJS.ProcessEnv
  /** With `runtime: 'local'` and no bubblewrap: run agents unsandboxed anyway (`BERTH_LOCAL_UNSANDBOXED`; default false: refuse). */
  localUnsandboxed?: boolean
  /**
   * Where sized workspace disks (`disk_mb`) are made: loop-mounted ext4 images, so only for
   * an engine on this machine (or `local`) and a server running as root (default `<dataDir>/disks` then;
   * `null` for none, and the workspace size is not enforced).
   */
  diskDir?: string | null
}

/** Sized workspace disks need root on the engine's machine; without them the size is not enforced (said once). */
function disksFor(diskDir: string | null): { disks?: DiskOptions; note?: string } {
  if (diskDir === null) return { note: 'berth: BERTH_DISK_DIR=off: workspace disk limits (disk_mb) are not enforced.' }
  if (process.getuid?.() !== 0)
    return {
      note: 'berth: not running as root: workspace disk limits (disk_mb) are not enforced; /tmp is still sized.',
    }
  return { disks: { dir: resolve(diskDir) } }
}

/**
 * The runtime `runtime` names: `auto` takes Docker if its socket (or `DOCKER_HOST`)
 * answers, else Podman if its socket answers, else `local` in a bubblewrap sandbox (it
 * throws where bwrap cannot work: see {@link localFor}). `docker` and `podman`
 * insist on that engine and throw a clear message when it does not answer within 3 s.
 *
 * @example
 * ```ts
 * const { runtime, description } = chooseRuntime({ runtime: 'auto', dataDir: './.data' })
 * ```
 */
export function chooseRuntime(options: ChooseRuntimeOptions): ChosenRuntime {
  const { runtime = 'auto', dataDir, warn = console.warn, env = process.env } = options
  if (runtime === 'local') return localFor(options, warn, { explicit: true })
  const { disks, note } = disksFor(options.diskDir === undefined ? join(dataDir, 'disks') : options.diskDir)
  const candidates =
    runtime === 'auto'
      ? [docker(env, disks), podman(env, disks)]
      : runtime === 'docker'
        ? [docker(env, disks)]
        : [podman(env, disks)]
  const answers = answerSync(
    candidates.map((c) => c.connection),
    PING_TIMEOUT_MS,
  )
  const index = answers.indexOf(true)
  if (index >= 0) {
    if (note) warn(note)
    const chosen = candidates[index]!.make()
    sweepAtStart(chosen.runtime, disks, warn)
    return chosen
  }
  const tried = candidates.map((c) => `${c.name} at ${where(c.connection)} does not answer`).join('; ')
  if (runtime !== 'auto') throw new Error(`BERTH_RUNTIME=${runtime}, but the engine does not answer. ${tried}`)
  warn(`No container engine answers (${tried}); falling back to BERTH_RUNTIME=local.`)
  return localFor(options, warn, { explicit: false })
}

/**
 * The runtimes a deployment's containers may be on, for `prune`, made without sweeping
 * anything: the engine at `engineUrl`, else the engine `runtime` names (it must answer), or
 * with `auto` every engine that answers; and `local` (`auto` or `local`) where its container
 * directory `<dataDir>/containers` exists.
 *
 * @example
 * ```ts
 * for (const { name, runtime } of await pruneTargets({ runtime: 'auto', dataDir: './.data' })) console.log(name)
 * ```
 */
export async function pruneTargets(
  config: { runtime?: RuntimeName; dataDir: string; engineUrl?: string | undefined },
  env: NodeJS.ProcessEnv = process.env,
): Promise<ChosenRuntime[]> {
  const runtime = config.runtime ?? 'auto'
  if (config.engineUrl) return [await engineAtUrl(config.engineUrl, runtime, env)]
  const out: ChosenRuntime[] = []
  if (runtime !== 'local') {
    const candidates =
      runtime === 'auto'
        ? [docker(env, undefined), podman(env, undefined)]
        : runtime === 'docker'
          ? [docker(env, undefined)]
          : [podman(env, undefined)]
    const answers = answerSync(
      candidates.map((c) => c.connection),
      PING_TIMEOUT_MS,
    )
    if (runtime !== 'auto' && !answers[0])
      throw new Error(`BERTH_RUNTIME=${runtime}, but the engine does not answer at ${where(candidates[0]!.connection)}`)
    for (const [i, c] of candidates.entries()) if (answers[i]) out.push(c.make())
  }
  const baseDir = join(config.dataDir, 'containers')
  if ((runtime === 'auto' || runtime === 'local') && existsSync(baseDir)) {
    const made = localRuntime({ baseDir })
    out.push({
      runtime: made,
      name: 'local',
      description: `local (${baseDir}, ${made.sandbox === 'bwrap' ? 'bubblewrap sandbox' : 'no sandbox'})`,
    })
  }
  return out
}

function where(c: EngineConnectionOptions): string {
  return c.socketPath ? `unix://${c.socketPath}` : `${c.protocol ?? 'http'}://${c.host}:${c.port}`
}

/**
 * The engine at an engine URL (`BERTH_ENGINE_URL`: `unix://`, `tcp://`, `https://`,
 * `ssh://`): Docker or Podman as `runtime` says; with `auto`, what the engine's `/version`
 * names (Podman lists a "Podman Engine" component). Rejects when it does not answer.
 *
 * @example
 * ```ts
 * const { runtime } = await engineAtUrl('ssh://ops@build-02', 'auto')
 * ```
 */
export async function engineAtUrl(
  url: string,
  runtime: RuntimeName,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ChosenRuntime> {
  const { docker: client, endpoint } = connectEngine(engineUrlOptions(url, env))
  let engine = runtime
  if (engine === 'auto') {
    const version = await within(client.version()).catch((err: Error) => {
      throw new Error(`BERTH_ENGINE_URL=${endpoint} does not answer: ${err.message}`)
    })
    engine = version.Components?.some((c) => /podman/i.test(c.Name)) ? 'podman' : 'docker'
  }
  const made = engine === 'podman' ? podmanRuntime({ docker: client }) : dockerRuntime({ docker: client })
  const name = engine === 'podman' ? 'podman' : 'docker'
  const description = `${engine} (${endpoint}, BERTH_ENGINE_URL)`
  await within(made.ping()).catch(async (err: Error) => {
    await made.close?.().catch(() => {})
    throw new Error(`BERTH_ENGINE_URL: ${description} does not answer: ${err.message}`)
  })
  return { runtime: made, name, description }
}

/** `promise`, or a rejection after {@link PING_TIMEOUT_MS}. */
async function within<T>(promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${PING_TIMEOUT_MS} ms`)), PING_TIMEOUT_MS)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}
