import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ResourceLimits } from '@berth/core'

/** Where the local runtime keeps its containers' cgroups, below each hierarchy's root. */
const PARENT = 'berth-local'
const CGROUP_FS = '/sys/fs/cgroup'
const CPU_PERIOD_US = 100_000

/** One container's cgroup directories: what joins them, and how the sandbox shows them. */
export interface ContainerCgroup {
  /** `cgroup.procs` files a process writes its pid to, before it execs the sandbox. */
  procs: string[]
  /** Host cgroup directory → where the sandbox shows it read-only (as an engine's container sees its own). */
  binds: [string, string][]
}

/** Resource limits through cgroups (v1 or v2), for the sandboxed local runtime. */
export interface Cgroups {
  version: 1 | 2
  /** Make the container's cgroup with its limits. */
  create(id: string, limits: ResourceLimits): ContainerCgroup
  /** The container's cgroup as {@link create} made it (after a restart). */
  of(id: string): ContainerCgroup
  /** Memory in use by everything in the container's cgroup, or null. */
  memoryBytes(id: string): number | null
  /** True when the kernel's OOM killer killed something in it. */
  oomKilled(id: string): boolean
  /** Remove the container's cgroup; retries while its processes are still on their way out. */
  remove(id: string): Promise<void>
}

function read(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim()
  } catch {
    return null
  }
}

/** The `name N` counter of a flat-keyed cgroup file (memory.events, memory.oom_control). */
function counter(file: string, name: string): number {
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(read(file) ?? '')
  return m ? Number(m[1]) : 0
}

async function rmdirRetrying(dir: string): Promise<void> {
  for (let i = 0; i < 40 && existsSync(dir); i++) {
    try {
      rmdirSync(dir)
    } catch {
      await new Promise((r) => setTimeout(r, 50)) // EBUSY: processes still leaving
    }
  }
}

function v1(): Cgroups | null {
  const ctrl = { memory: join(CGROUP_FS, 'memory'), pids: join(CGROUP_FS, 'pids'), cpu: join(CGROUP_FS, 'cpu') }
  if (!Object.values(ctrl).every((d) => existsSync(join(d, 'cgroup.procs')))) return null
  try {
    for (const d of Object.values(ctrl)) mkdirSync(join(d, PARENT), { recursive: true })
  } catch {
    return null // read-only or not ours
  }
  const dirs = (id: string) => ({
    memory: join(ctrl.memory, PARENT, id),
    pids: join(ctrl.pids, PARENT, id),
    cpu: join(ctrl.cpu, PARENT, id),
  })
  const of = (id: string): ContainerCgroup => {
    const d = dirs(id)
    return {
      procs: Object.values(d).map((dir) => join(dir, 'cgroup.procs')),
      binds: Object.entries(d).map(([name, dir]) => [dir, join(CGROUP_FS, name)]),
    }
  }
  return {
    version: 1,
    of,
    create(id, limits) {
      const d = dirs(id)
      for (const dir of Object.values(d)) mkdirSync(dir, { recursive: true })
      if (limits.memoryBytes !== undefined) {
        writeFileSync(join(d.memory, 'memory.limit_in_bytes'), String(limits.memoryBytes))
        // Swap capped at the same amount: memory+swap may not exceed the memory limit.
        if (existsSync(join(d.memory, 'memory.memsw.limit_in_bytes')))
          writeFileSync(join(d.memory, 'memory.memsw.limit_in_bytes'), String(limits.memoryBytes))
      }
      if (limits.pids !== undefined) writeFileSync(join(d.pids, 'pids.max'), String(limits.pids))
      if (limits.cpus !== undefined) {
        writeFileSync(join(d.cpu, 'cpu.cfs_period_us'), String(CPU_PERIOD_US))
        writeFileSync(join(d.cpu, 'cpu.cfs_quota_us'), String(Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US))))
      }
      return of(id)
    },
    memoryBytes: (id) => {
      const v = read(join(dirs(id).memory, 'memory.usage_in_bytes'))
      return v === null ? null : Number(v)
    },
    oomKilled: (id) => counter(join(dirs(id).memory, 'memory.oom_control'), 'oom_kill') > 0,
    async remove(id) {
      await Promise.all(Object.values(dirs(id)).map(rmdirRetrying))
    },
  }
}

function v2(): Cgroups | null {
  const controllers = read(join(CGROUP_FS, 'cgroup.controllers'))?.split(' ') ?? []
  if (!['memory', 'pids', 'cpu'].every((c) => controllers.includes(c))) return null
  const parent = join(CGROUP_FS, PARENT)
  try {
    mkdirSync(parent, { recursive: true })
    // Children of `berth-local` get the controllers; it holds no process itself.
    writeFileSync(join(parent, 'cgroup.subtree_control'), '+memory +pids +cpu')
  } catch {
    return null // not delegated to us
  }
  const dir = (id: string) => join(parent, id)
  const of = (id: string): ContainerCgroup => ({
    procs: [join(dir(id), 'cgroup.procs')],
    binds: [[dir(id), CGROUP_FS]],
  })
  return {
    version: 2,
    of,
    create(id, limits) {
      const d = dir(id)
      mkdirSync(d, { recursive: true })
      if (limits.memoryBytes !== undefined) {
        writeFileSync(join(d, 'memory.max'), String(limits.memoryBytes))
        if (existsSync(join(d, 'memory.swap.max'))) writeFileSync(join(d, 'memory.swap.max'), '0')
      }
      if (limits.pids !== undefined) writeFileSync(join(d, 'pids.max'), String(limits.pids))
      if (limits.cpus !== undefined) {
        writeFileSync(join(d, 'cpu.max'), `${Math.max(1000, Math.round(limits.cpus * CPU_PERIOD_US))} ${CPU_PERIOD_US}`)
      }
      return of(id)
    },
    memoryBytes: (id) => {
      const v = read(join(dir(id), 'memory.current'))
      return v === null ? null : Number(v)
    },
    oomKilled: (id) => counter(join(dir(id), 'memory.events'), 'oom_kill') > 0,
    async remove(id) {
      await rmdirRetrying(dir(id))
    },
  }
}

/**
 * The cgroups the local runtime can enforce limits with: v2 where `/sys/fs/cgroup` is a
 * unified hierarchy with memory, pids and cpu delegated to us, v1 where those controllers
 * are mounted writable; `null` elsewhere (not root, read-only cgroupfs): then limits are
 * not enforced, and the runtime says so.
 *
 * @example
 * ```ts
 * const cg = detectCgroups()
 * const { procs } = cg!.create(id, { memoryBytes: 512 * 1024 * 1024, pids: 256 })
 * ```
 */
export function detectCgroups(): Cgroups | null {
  if (process.platform !== 'linux') return null
  return existsSync(join(CGROUP_FS, 'cgroup.controllers')) ? v2() : v1()
}

/**
 * Run `argv` in the given cgroups: a `/bin/sh` writes its own pid to each `cgroup.procs`,
 * then execs, so the command and everything it starts are limited from their first
 * instruction. Exit 125 when joining fails.
 *
 * @example
 * ```ts
 * inCgroups(['/sys/fs/cgroup/pids/berth-local/ab12/cgroup.procs'], ['bwrap', '--', 'sleep', '1'])
 * // ['/bin/sh', '-c', '…', 'sh', '/sys/fs/cgroup/pids/berth-local/ab12/cgroup.procs', '--', 'bwrap', '--', 'sleep', '1']
 * ```
 */
export function inCgroups(procs: string[], argv: string[]): string[] {
  const script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
  return ['/bin/sh', '-c', script, 'sh', ...procs, '--', ...argv]
}
