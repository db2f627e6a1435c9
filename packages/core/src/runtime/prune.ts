/** Everything one deployment left on its runtimes, listed and removed (the standalone server's `prune`). */
import { readdir } from 'node:fs/promises'
import { basename, join, resolve } from 'node:path'
import type { ContainerRuntime } from '../ports/container-runtime.js'
import { DISK_LABEL, isDiskName, releaseUnusedDisk } from './disks.js'

/** The label naming the deployment (its pool) a container or volume belongs to. */
const POOL_LABEL = 'berth.pool'

/** One thing of the deployment: on a runtime (`runtime` names it), or a disk in its disk directory. */
export interface PruneItem {
  kind: 'container' | 'volume' | 'network' | 'disk'
  /** The runtime's name for it (a container's name, a volume's, a network's), or a disk's mount directory. */
  name: string
  /** Which runtime holds it (`docker`, `podman`, `local`); none for a disk found in the directory only. */
  runtime?: string
  /** What it is or holds: a container's state and disk, a network's firewall chains. */
  detail?: string
}

/** Options of {@link pruneDeployment}. */
export interface PruneOptions {
  /** The runtimes the deployment's containers may be on, by name. */
  runtimes: { name: string; runtime: ContainerRuntime }[]
  /** The deployment's pool name: its containers and volumes carry `berth.pool=<pool>`. */
  pool: string
  /** Its disk directory: disks there that no other deployment's container or volume names go too. */
  diskDir?: string | null
  /** List only: nothing is removed. */
  dryRun?: boolean
  /** Told of each item once it is removed (or, in a dry run, found). */
  onItem?: (item: PruneItem) => void
}

/** What {@link pruneDeployment} found, and what it could not remove. */
export interface PruneReport {
  items: PruneItem[]
  failures: { item: PruneItem; error: string }[]
}

/**
 * List, then (unless `dryRun`) remove, everything of the deployment whose pool is `pool`:
 * on each runtime its containers (any state; with each its workspace disk, network namespace,
 * and on `local` its sandbox processes and mounts) and its volumes (with their disks), then
 * the engine networks only its containers used (`pruneNetworks`: allowlist networks and their
 * firewall chains; a network no container used is left to whichever deployment's sweep), then the disks left in `diskDir` that no other deployment's container or
 * volume names (made by a server killed before its container was). Containers and volumes of
 * other pools are never touched. A failure is recorded and the rest goes on.
 *
 * @example
 * ```ts
 * const report = await pruneDeployment({ runtimes: [{ name: 'docker', runtime }], pool: 'berth-1c0e5f2a', dryRun: true })
 * ```
 */
export async function pruneDeployment(o: PruneOptions): Promise<PruneReport> {
  const report: PruneReport = { items: [], failures: [] }
  const step = async (item: PruneItem, remove: () => Promise<unknown>) => {
    try {
      if (!o.dryRun) await remove()
      report.items.push(item)
      o.onItem?.(item)
    } catch (err) {
      report.failures.push({ item, error: err instanceof Error ? err.message : String(err) })
    }
  }
  const dir = o.diskDir ? resolve(o.diskDir) : undefined
  /** Disks named by other deployments' containers and volumes (kept), and by this one's (listed with them). */
  const others = new Set<string>()
  const listed = new Set<string>()
  const withDisk = (disk: string | undefined, state?: string) => {
    if (disk) listed.add(resolve(disk))
    const detail = [state, disk && `disk ${disk}`].filter(Boolean).join(', ')
    return detail ? { detail } : {}
  }
  for (const { name, runtime } of o.runtimes) {
    // The networks this pool's containers are on, read before they go: then no container uses them.
    const onNetworks = await runtime.pruneNetworks?.(o.pool, { dryRun: true })
    const used = new Set(onNetworks?.map((n) => n.name))
    for (const c of await runtime.list({ all: true })) {
      const disk = c.labels[DISK_LABEL]
      if (c.labels[POOL_LABEL] !== o.pool) {
        if (disk) others.add(resolve(disk))
        continue
      }
      const item = { kind: 'container' as const, name: c.name, runtime: name, ...withDisk(disk, c.state) }
      await step(item, () => runtime.remove(c.id))
    }
    for (const v of await runtime.listVolumes()) {
      const disk = v.labels[DISK_LABEL] ?? (dir && join(dir, v.name))
      if (v.labels[POOL_LABEL] !== o.pool) {
        if (disk) others.add(resolve(disk))
        continue
      }
      const item = { kind: 'volume' as const, name: v.name, runtime: name, ...withDisk(v.labels[DISK_LABEL]) }
      await step(item, () => runtime.removeVolume(v.name))
    }
    // Only this pool's containers used them (in a dry run they are still there); removed once those are gone.
    for (const n of (await runtime.pruneNetworks?.(o.pool, { dryRun: o.dryRun, used })) ?? []) {
      const item: PruneItem = { kind: 'network', name: n.name, runtime: name, detail: n.detail }
      if (n.error) report.failures.push({ item, error: n.error })
      else await step(item, async () => {})
    }
  }
  if (!dir) return report
  // Disks left in the directory whose container or volume is gone, unless another deployment names them.
  for (const file of await readdir(dir).catch(() => [] as string[])) {
    const mount = join(dir, file.slice(0, -'.img'.length))
    if (!file.endsWith('.img') || !isDiskName(basename(mount)) || others.has(mount) || listed.has(mount)) continue
    await step({ kind: 'disk', name: mount, detail: 'no container or volume names it' }, async () => {
      if (!(await releaseUnusedDisk(mount))) throw new Error('still in use by a process or container on this host')
    })
  }
  return report
}
