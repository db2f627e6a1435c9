import { join } from 'node:path'
import { connectEngine, dockerRuntime, engineUrlOptions } from '@berth/adapter-docker'
import { localRuntime } from '@berth/adapter-local'
import { discoverPodman, podmanRuntime } from '@berth/adapter-podman'
import type { ContainerRuntime } from '@berth/core'
import type { BerthConfig } from '@berth/server'

/** The container runtime `BERTH_RUNTIME` asks for, and a description safe to log. */
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

/** Resolves when the engine answers, rejects with why it did not (within {@link PING_TIMEOUT_MS}). */
async function answers<T>(runtime: { ping(): Promise<T> }): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${PING_TIMEOUT_MS} ms`)), PING_TIMEOUT_MS)
  })
  try {
    return await Promise.race([runtime.ping(), timeout])
  } finally {
    clearTimeout(timer)
  }
}

function docker(): ChosenRuntime {
  // Docker's default socket named explicitly: dockerode's own default is a lazy lookup
  // that cannot be printed. DOCKER_HOST (with its TLS variables) is left to dockerode.
  const { docker: client, endpoint } = connectEngine(process.env.DOCKER_HOST ? {} : { socketPath: DOCKER_SOCKET })
  return { runtime: dockerRuntime({ docker: client }), name: 'docker', description: `docker (${endpoint})` }
}

/**
 * The engine at `BERTH_ENGINE_URL`: Docker or Podman as `BERTH_RUNTIME` says; with `auto`,
 * what the engine's `/version` names (Podman lists a "Podman Engine" component).
 */
async function atUrl(url: string, runtime: BerthConfig['runtime']): Promise<ChosenRuntime> {
  const { docker: client, endpoint } = connectEngine(engineUrlOptions(url, process.env))
  let engine = runtime
  if (engine === 'auto') {
    const version = await answers({ ping: () => client.version() }).catch((err: Error) => {
      throw new Error(`BERTH_ENGINE_URL=${endpoint} does not answer: ${err.message}`)
    })
    engine = version.Components?.some((c) => /podman/i.test(c.Name)) ? 'podman' : 'docker'
  }
  const made = engine === 'podman' ? podmanRuntime({ docker: client }) : dockerRuntime({ docker: client })
  return {
    runtime: made,
    name: engine === 'podman' ? 'podman' : 'docker',
    description: `${engine} (${endpoint}, BERTH_ENGINE_URL)`,
  }
}

function podman(): ChosenRuntime {
  const found = discoverPodman()
  const { docker: client, endpoint } = connectEngine(found.connection)
  return {
    runtime: podmanRuntime({ docker: client }),
    name: 'podman',
    description: `podman (${endpoint}, ${found.source})`,
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
 * unsandboxed (`BERTH_LOCAL_UNSANDBOXED=true`), with the loud warning; otherwise it refuses.
 *
 * @example
 * ```ts
 * const chosen = localFor(configFromEnv(process.env), console.warn, { explicit: true })
 * ```
 */
export function localFor(
  config: Pick<BerthConfig, 'dataDir' | 'localUnsandboxed'>,
  warn: (message: string) => void,
  opts: { explicit: boolean; make?: typeof localRuntime },
): ChosenRuntime {
  const baseDir = join(config.dataDir, 'containers')
  const runtime = (opts.make ?? localRuntime)({ baseDir })
  if (runtime.sandbox === 'none') {
    if (!opts.explicit || !config.localUnsandboxed) throw noSandbox(runtime.description, opts.explicit)
    warn(NO_ISOLATION_WARNING)
    return { runtime, name: 'local', description: `local (${baseDir}, NO ISOLATION)` }
  }
  warn(`berth: runtime local: tasks run in a ${runtime.description}.`)
  return { runtime, name: 'local', description: `local (${baseDir}, bubblewrap sandbox)` }
}

/**
 * The runtime per `BERTH_RUNTIME`: `auto` takes Docker if its socket answers, else Podman
 * if its socket answers, else `local` in a bubblewrap sandbox (refused where bwrap cannot
 * work: see {@link localFor}). `docker` and
 * `podman` insist on that engine and reject with a clear message when it does not answer.
 * With `BERTH_ENGINE_URL` (`unix://`, `tcp://`, `https://`, `ssh://`), that engine is the
 * only candidate (`auto`: Docker or Podman, as the engine says), never `local`.
 *
 * @example
 * ```ts
 * const { runtime, description } = await runtimeFor(configFromEnv(process.env), console.warn)
 * ```
 */
export async function runtimeFor(config: BerthConfig, warn: (message: string) => void): Promise<ChosenRuntime> {
  if (config.runtime === 'local') return localFor(config, warn, { explicit: true })
  if (config.engineUrl) {
    const chosen = await atUrl(config.engineUrl, config.runtime)
    await answers(chosen.runtime).catch(async (err: Error) => {
      await chosen.runtime.close?.().catch(() => {})
      throw new Error(`BERTH_ENGINE_URL: ${chosen.description} does not answer: ${err.message}`)
    })
    return chosen
  }
  const candidates = config.runtime === 'auto' ? [docker, podman] : config.runtime === 'docker' ? [docker] : [podman]
  const tried: string[] = []
  for (const candidate of candidates) {
    const chosen = candidate()
    try {
      await answers(chosen.runtime)
      return chosen
    } catch (err) {
      tried.push(`${chosen.description}: ${(err as Error).message}`)
      await chosen.runtime.close?.().catch(() => {})
    }
  }
  if (config.runtime !== 'auto') {
    throw new Error(`BERTH_RUNTIME=${config.runtime}, but the engine does not answer. ${tried.join('; ')}`)
  }
  warn(`No container engine answers (${tried.join('; ')}); falling back to BERTH_RUNTIME=local.`)
  return localFor(config, warn, { explicit: false })
}
