/**
 * CPU time over a window, split three ways: Berth (the server process), the engine (its
 * daemons, dockerd and containerd or podman's API service, and the pool's containers'
 * shims or conmon processes) and the agent (the processes inside the containers of one
 * pool, from their cgroups' CPU accounting). Linux only; each figure is NaN where /proc or the cgroup files are absent.
 *
 * Processes and containers come and go during the window, so both are sampled every
 * `everyMs` and the last value seen counts: a short-lived process or a container removed
 * between two samples loses at most that much of its CPU (the engine's children that are
 * reaped by a daemon count in the daemon's own children time).
 */
import { readdirSync, readFileSync } from 'node:fs'
import type { connectEngine } from '@berth/adapter-docker'

type Dockerode = ReturnType<typeof connectEngine>['docker']

const TICK_MS = 10 // USER_HZ is 100 on Linux

/** Names (`/proc/<pid>/comm`, cut at 15 characters) of an engine's processes. */
const ENGINE_COMMS: Record<string, RegExp> = {
  docker: /^(dockerd|containerd|containerd-shim.*|runc|docker-proxy|docker-init)$/,
  podman: /^(podman|conmon|runc|crun|catatonit|slirp4netns|netavark|aardvark-dns)$/,
}

function procCpuMs(pid: number, withChildren: boolean): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces) start at state (field 3).
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const own = Number(f[11]) + Number(f[12])
    return (withChildren ? own + Number(f[13]) + Number(f[14]) : own) * TICK_MS
  } catch {
    return null
  }
}

/**
 * Whether a process's reaped children count as its own: yes for the daemons (their
 * children are short `runc` calls), no for shims and conmon, whose children are the
 * container's processes (already counted in the container's cgroup).
 */
function reapsEngineHelpers(pid: number): boolean {
  try {
    return /^(dockerd|containerd|podman)$/.test(readFileSync(`/proc/${pid}/comm`, 'utf8').trim())
  } catch {
    return false
  }
}

/** Per-container helpers (a shim or conmon per container): counted only for the pool's own containers. */
const PER_CONTAINER = /^(containerd-shim.*|conmon)$/

/**
 * The engine's processes now: its daemons, and the per-container helpers whose command
 * line names one of `containers` (another client's containers are not this server's cost).
 */
function enginePids(engine: string, exclude: Set<number>, containers: Set<string>): number[] {
  const re = ENGINE_COMMS[engine]
  if (!re) return []
  const pids: number[] = []
  for (const name of readdirSync('/proc')) {
    const pid = Number(name)
    if (!Number.isInteger(pid) || exclude.has(pid)) continue
    try {
      const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
      if (!re.test(comm)) continue
      if (PER_CONTAINER.test(comm)) {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
        if (![...containers].some((id) => cmdline.includes(id))) continue
      }
      pids.push(pid)
    } catch {
      // gone
    }
  }
  return pids
}

/** The cgroup CPU counter file of a process: cgroup v1 `cpuacct.usage` (ns) or v2 `cpu.stat` (µs). */
function cgroupCpuFile(pid: number): string | null {
  try {
    const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n')
    const v1 = lines.find((l) => /^\d+:[^:]*\bcpuacct\b[^:]*:/.test(l))
    if (v1) return `/sys/fs/cgroup/cpuacct${v1.split(':')[2]}/cpuacct.usage`
    const v2 = lines.find((l) => l.startsWith('0::'))
    return v2 ? `/sys/fs/cgroup${v2.slice(3)}/cpu.stat` : null
  } catch {
    return null
  }
}

function cgroupCpuMs(file: string): number | null {
  try {
    const text = readFileSync(file, 'utf8')
    if (file.endsWith('cpuacct.usage')) return Number(text.trim()) / 1e6
    const m = /usage_usec (\d+)/.exec(text)
    return m ? Number(m[1]) / 1000 : null
  } catch {
    return null
  }
}

/** CPU milliseconds spent in the window by each part. */
export interface CpuSplit {
  berthMs: number
  engineMs: number
  agentMs: number
  /** Containers whose cgroup was read at least once. */
  containers: number
  /** Of those, the containers that started during the window (their start-up counts in full). */
  started: number
}

/** A running measurement: `stop()` ends it and returns the split. */
export interface CpuWatch {
  stop(): Promise<CpuSplit>
}

/**
 * Start measuring. `docker` is the engine's client (its event stream names the pool's
 * containers as they start); `pool` the `berth.pool` label of the server's containers.
 *
 * @example
 * ```ts
 * const watch = await watchCpu({ serverPid, engine: 'docker', docker, pool })
 * await runTasks()
 * const { berthMs, engineMs, agentMs } = await watch.stop()
 * ```
 */
export async function watchCpu(o: {
  serverPid: number
  engine: string
  docker: Dockerode
  pool: string
  everyMs?: number
}): Promise<CpuWatch> {
  const exclude = new Set([process.pid, o.serverPid])
  const berth0 = procCpuMs(o.serverPid, false) ?? NaN
  // Engine processes: first and last value seen per pid (a new one counts from zero).
  const engine = new Map<number, { first: number; last: number }>()
  // The pool's containers (ids), as the engine announces them.
  const known = new Set<string>()
  const sampleEngine = (initial: boolean) => {
    for (const pid of enginePids(o.engine, exclude, known)) {
      const cpu = procCpuMs(pid, reapsEngineHelpers(pid))
      if (cpu === null) continue
      const seen = engine.get(pid)
      if (seen) seen.last = cpu
      else engine.set(pid, { first: initial ? cpu : 0, last: cpu })
    }
  }
  // Containers: the counter file of each, found when it starts; first and last value.
  const agent = new Map<string, { file: string; first: number; last: number; started: boolean }>()
  const addContainer = async (id: string, initial: boolean) => {
    known.add(id)
    if (agent.has(id)) return
    const info = await o.docker
      .getContainer(id)
      .inspect()
      .catch(() => null)
    const file = info?.State.Pid ? cgroupCpuFile(info.State.Pid) : null
    const cpu = file ? cgroupCpuMs(file) : null
    if (file && cpu !== null) agent.set(id, { file, first: initial ? cpu : 0, last: cpu, started: !initial })
  }
  const running = await o.docker.listContainers({ filters: { label: [`berth.pool=${o.pool}`] } }).catch(() => [])
  await Promise.all(running.map((c) => addContainer(c.Id, true)))
  // After the listing, so the helpers of containers already running count from now.
  sampleEngine(true)
  const events = (await o.docker.getEvents({
    filters: { type: ['container'], event: ['start'], label: [`berth.pool=${o.pool}`] },
  })) as NodeJS.ReadableStream & { destroy(): void }
  let pending = ''
  events.on('data', (chunk: Buffer) => {
    pending += chunk.toString('utf8')
    for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
      const line = pending.slice(0, nl)
      pending = pending.slice(nl + 1)
      try {
        const e = JSON.parse(line) as { id?: string; Actor?: { ID?: string } }
        const id = e.id ?? e.Actor?.ID
        if (id) void addContainer(id, false)
      } catch {
        // a partial or foreign line
      }
    }
  })
  events.on('error', () => {})
  const sampleAgents = () => {
    for (const c of agent.values()) {
      const cpu = cgroupCpuMs(c.file)
      if (cpu !== null) c.last = cpu
    }
  }
  const timer = setInterval(() => {
    sampleEngine(false)
    sampleAgents()
  }, o.everyMs ?? 200)
  return {
    async stop() {
      clearInterval(timer)
      sampleEngine(false)
      sampleAgents()
      events.destroy()
      const sum = (xs: Iterable<{ first: number; last: number }>) => {
        let total = 0
        for (const x of xs) total += x.last - x.first
        return total
      }
      return {
        berthMs: (procCpuMs(o.serverPid, false) ?? NaN) - berth0,
        engineMs: sum(engine.values()),
        agentMs: sum(agent.values()),
        containers: agent.size,
        started: [...agent.values()].filter((c) => c.started).length,
      }
    },
  }
}
