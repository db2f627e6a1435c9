/** The pool's vocabulary: its options, the claims it serves, the leases and container records it hands out. */
import { createHash } from 'node:crypto'
import { resolve } from 'node:path'
import type { Clock } from '../ports/clock.js'
import type { ContainerRuntime, ContainerSpec, ImageRecipe } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { Metrics } from '../ports/metrics.js'
import type { Store } from '../ports/store.js'

/** Claim priority; higher priorities are served first when the pool is full. */
export type Priority = 'low' | 'normal' | 'high'

/** A container the pool manages, as persisted (so a restarted server can account for it). */
export interface PooledContainer {
  /** Berth's id (`ctr_…`), also the `berth.container` label. */
  id: string
  engine_id: string
  state: 'idle' | 'in_use'
  owner_id: string | null
  workspace_id: string | null
  purpose: 'batch' | 'session' | null
  created_at: string
  claimed_at: string | null
  /** Its memory cap, reserved against the pool's memory budget (absent on older records: the pool's default). */
  memory_bytes?: number
}

/** A claimed container. Release it when done: batch containers are reaped. */
export interface Lease {
  container: PooledContainer
  /** Give the container back: it is removed (reaped), never reused by another caller. */
  release(): Promise<void>
}

export interface ClaimRequest {
  owner_id: string
  workspace_id?: string | null
  purpose: 'batch' | 'session'
  priority?: Priority
  /**
   * A dedicated container (e.g. with the workspace's volume) instead of a warm one: it is
   * created for this claim and counts toward `max` like any other.
   */
  spec?: Partial<ContainerSpec>
  /** Labels for a dedicated container (warm ones get theirs at creation). */
  labels?: Record<string, string>
  signal?: AbortSignal
  /** Told when the claim has to wait, and why: every container is in use, or the memory budget is taken. */
  onWait?: (waiting: { reason: 'pool_full' | 'memory'; message: string }) => void
}

export interface PoolOptions {
  runtime: ContainerRuntime
  store: Store
  clock: Clock
  logger: Logger
  /** Where claim latency and the container counts are observed (default none). */
  metrics?: Metrics
  /** Image every pooled container starts from. */
  image: string
  /**
   * The host's memory budget for containers, in bytes: the sum of their memory caps stays
   * within it; a claim that would exceed it waits (default none).
   */
  memoryBudgetBytes?: number | null
  /** Idle containers kept warm. */
  min: number
  /** Containers at most, idle and in use together. */
  max: number
  /**
   * Pool name: the `berth.pool` label. Recovery only touches containers carrying it, so
   * servers sharing an engine need different names (see {@link defaultPoolName}).
   */
  name?: string
  /**
   * How to build the image when the engine lacks it and no registry has it (e.g.
   * `hostImageRecipe()` from `@berth/adapter-docker`). Without one, a missing image that
   * cannot be pulled fails container creation with CONTAINER_FAILED.
   */
  imageRecipe?: ImageRecipe
  /** Reconnecting to an engine that does not answer: first wait and cap, doubling between (default 1 s to 30 s). */
  retry?: { initialMs?: number; maxMs?: number }
  /** How long the engine gets to answer a ping before it counts as down (default 5 s). */
  pingTimeoutMs?: number
  /** Spec fields every container gets: limits, network, the runner's read-only mount, env. */
  spec?: Partial<ContainerSpec>
  /**
   * At start, decides whether an in-use container found on the engine is still needed
   * (e.g. its session workspace is alive). Unaccounted containers are removed.
   */
  adopt?: (container: PooledContainer) => Promise<boolean>
}

/**
 * The default pool name for a data directory: `berth-` and 8 hex digits of its absolute
 * path's hash, so two servers with their own data on one engine never share a pool.
 *
 * @example
 * ```ts
 * defaultPoolName('/var/lib/berth') // 'berth-1c0e5f2a' (stable for that path)
 * ```
 */
export function defaultPoolName(dataDir: string): string {
  return `berth-${createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 8)}`
}

/**
 * The store key of a pool's container record (`pool:<name>:<id>`).
 *
 * @example
 * ```ts
 * poolKey('berth-1c0e5f2a', 'ctr_abc') // 'pool:berth-1c0e5f2a:ctr_abc'
 * ```
 */
export function poolKey(pool: string, id: string): string {
  return `pool:${pool}:${id}`
}
