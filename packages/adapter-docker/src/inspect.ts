import type { ContainerInfo, ContainerState, ContainerStats, ContainerSummary } from '@berth/core'
import type { ContainerInfo as DockerListItem, ContainerInspectInfo, ContainerStats as DockerStats } from 'dockerode'
import { GVISOR_PIDS_HEADROOM, ISOLATION_LABEL } from './hardening.js'

const STATES = new Set<ContainerState>(['created', 'running', 'paused', 'restarting', 'removing', 'exited', 'dead'])

/**
 * An engine state word as a {@link ContainerState} (Podman's `configured`/`initialized` are `created`, `stopped` is `exited`).
 *
 * @example
 * ```ts
 * toState('configured') // 'created'
 * ```
 */
export function toState(status: string | undefined): ContainerState {
  const s = (status ?? '').toLowerCase()
  if (STATES.has(s as ContainerState)) return s as ContainerState
  if (s === 'stopped' || s === 'stopping') return 'exited'
  return 'created'
}

/**
 * An engine timestamp as ISO-8601 UTC, `null` for Go's zero time or an unparsable value.
 *
 * @example
 * ```ts
 * toIso('2026-01-02T03:04:05.123456789Z') // '2026-01-02T03:04:05.123Z'
 * ```
 */
export function toIso(ts: string | number | undefined | null): string | null {
  if (ts === undefined || ts === null || ts === '') return null
  if (typeof ts === 'number') return new Date(ts * 1000).toISOString()
  if (ts.startsWith('0001-01-01')) return null
  // Trim nanoseconds to milliseconds; Date.parse wants at most 3 fractional digits.
  const d = new Date(ts.replace(/(\.\d{3})\d+/, '$1'))
  return Number.isNaN(d.getTime()) ? null : d.toISOString()
}

/**
 * A container inspect answer as Berth's {@link ContainerInfo}.
 *
 * @example
 * ```ts
 * const info = toContainerInfo(await docker.getContainer(id).inspect())
 * ```
 */
export function toContainerInfo(raw: ContainerInspectInfo): ContainerInfo {
  const state = toState(raw.State?.Status)
  const host = raw.HostConfig ?? {}
  const cpus = host.NanoCpus
    ? host.NanoCpus / 1e9
    : host.CpuQuota && host.CpuPeriod
      ? host.CpuQuota / host.CpuPeriod
      : 0
  const exited = state === 'exited' || state === 'dead'
  // The agent's limit, without the room made for gVisor's own threads.
  const pids = (host.PidsLimit ?? 0) - (raw.Config?.Labels?.[ISOLATION_LABEL] === 'gvisor' ? GVISOR_PIDS_HEADROOM : 0)
  return {
    id: raw.Id,
    name: (raw.Name ?? '').replace(/^\//, ''),
    image: raw.Config?.Image ?? raw.Image,
    state,
    running: raw.State?.Running === true,
    exitCode: exited ? (raw.State?.ExitCode ?? null) : null,
    labels: raw.Config?.Labels ?? {},
    createdAt: toIso(raw.Created) ?? new Date(0).toISOString(),
    startedAt: toIso(raw.State?.StartedAt),
    finishedAt: exited ? toIso(raw.State?.FinishedAt) : null,
    oomKilled: raw.State?.OOMKilled === true,
    limits: {
      ...(host.Memory ? { memoryBytes: host.Memory } : {}),
      ...(cpus ? { cpus } : {}),
      ...(host.PidsLimit && pids > 0 ? { pids } : {}),
    },
  }
}

/**
 * A list entry as Berth's {@link ContainerSummary}.
 *
 * @example
 * ```ts
 * const items = (await docker.listContainers({ all: true })).map(toContainerSummary)
 * ```
 */
export function toContainerSummary(raw: DockerListItem): ContainerSummary {
  return {
    id: raw.Id,
    name: (raw.Names?.[0] ?? '').replace(/^\//, ''),
    image: raw.Image,
    state: toState(raw.State),
    labels: raw.Labels ?? {},
    createdAt: toIso(raw.Created) ?? new Date(0).toISOString(),
  }
}

/** Limits at or above this are "unlimited" (cgroup v1 reports ~2^63). */
const UNLIMITED = 2 ** 60

/**
 * A one-shot stats answer as Berth's {@link ContainerStats}: usage minus inactive page cache, like `docker stats`.
 *
 * @example
 * ```ts
 * const { memoryBytes } = toContainerStats(await docker.getContainer(id).stats({ stream: false }))
 * ```
 */
export function toContainerStats(raw: DockerStats): ContainerStats {
  const mem = (raw.memory_stats ?? {}) as { usage?: number; limit?: number; stats?: Record<string, number> }
  const s = mem.stats ?? {}
  const cache = s.total_inactive_file ?? s.inactive_file ?? 0
  const usage = mem.usage ?? 0
  const limit = mem.limit ?? 0
  const pids = (raw as { pids_stats?: { current?: number } }).pids_stats?.current
  return {
    memoryBytes: Math.max(0, usage - (cache < usage ? cache : 0)),
    memoryLimitBytes: limit > 0 && limit < UNLIMITED ? limit : null,
    pids: typeof pids === 'number' ? pids : null,
  }
}
