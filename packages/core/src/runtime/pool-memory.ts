/** Memory admission: the sum of the pool's containers' memory caps kept within the host's budget. */
import { validationError } from '@berth/contract'
import type { ContainerSpec } from '../ports/container-runtime.js'
import type { PooledContainer } from './pool-options.js'

/** The memory cap the engine adapters give a container whose spec sets none (2 GiB). */
export const DEFAULT_CONTAINER_MEMORY_BYTES = 2 * 1024 ** 3

const MB = 1024 * 1024

/**
 * The host's memory budget for containers: every container the pool holds (idle or in use,
 * or being created) reserves its memory cap, and a new one is made only while the caps sum
 * to at most `budgetBytes`. Caps are what the engine enforces (a container is killed at its
 * cap), so the sum bounds what the containers can take together, whatever they use now.
 *
 * @example
 * ```ts
 * const memory = new MemoryBudget(8 * 1024 ** 3, { limits: { memoryBytes: 2 * 1024 ** 3 } })
 * memory.fits(pool.list(), 0, memory.capOf(undefined)) // false once four 2 GiB containers exist
 * ```
 */
export class MemoryBudget {
  constructor(
    readonly budgetBytes: number,
    private readonly base: Partial<ContainerSpec> | undefined,
  ) {}

  /** The memory cap of a container made from the pool's spec with `spec` on top. */
  capOf(spec: Partial<ContainerSpec> | undefined): number {
    return spec?.limits?.memoryBytes ?? this.base?.limits?.memoryBytes ?? DEFAULT_CONTAINER_MEMORY_BYTES
  }

  /** The caps the pool's containers reserve, plus `creatingBytes` for creations under way. */
  reserved(containers: Iterable<PooledContainer>, creatingBytes: number): number {
    let sum = creatingBytes
    for (const c of containers) sum += c.memory_bytes ?? this.capOf(undefined)
    return sum
  }

  /** Whether one more container of `needBytes` fits beside what is reserved. */
  fits(containers: Iterable<PooledContainer>, creatingBytes: number, needBytes: number): boolean {
    return this.reserved(containers, creatingBytes) + needBytes <= this.budgetBytes
  }

  /** How many more containers of `needBytes` fit beside what is reserved. */
  room(containers: Iterable<PooledContainer>, creatingBytes: number, needBytes: number): number {
    return Math.max(0, Math.floor((this.budgetBytes - this.reserved(containers, creatingBytes)) / needBytes))
  }

  /** Why a claim for a container of `needBytes` waits: what the containers hold of the budget. */
  waitMessage(containers: Iterable<PooledContainer>, creatingBytes: number, needBytes: number): string {
    const mb = (n: number) => Math.ceil(n / MB)
    const used = this.reserved(containers, creatingBytes)
    return `Containers hold ${mb(used)} MiB of the host's ${mb(this.budgetBytes)} MiB memory budget and this task's needs ${mb(needBytes)} MiB; it starts when enough is released`
  }

  /** 400 for a container that could never fit, even with the pool empty. */
  assertFits(needBytes: number): void {
    if (needBytes <= this.budgetBytes) return
    const need = Math.ceil(needBytes / MB)
    const budget = Math.floor(this.budgetBytes / MB)
    throw validationError([
      {
        location: 'body',
        path: 'profile_id',
        message: `the task's container needs ${need} MiB of memory (its environment's limits.memory_mb), more than this server's memory budget for all containers (${budget} MiB)`,
      },
    ])
  }
}
