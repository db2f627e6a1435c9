/** What a previous run left on the engine: adopt the containers the pool can account for, remove the rest. */
import { MANAGED_LABEL, type ContainerRuntime } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import { SPEC_LABEL } from './pool-create.js'
import { poolKey, type PooledContainer } from './pool-options.js'

export interface RecoverOptions {
  runtime: ContainerRuntime
  store: Store
  logger: Logger
  /** The pool's name: only containers labelled `berth.pool=<name>` are touched. */
  name: string
  /** Whether an in-use container is still needed (idle ones are adopted when they run). */
  adopt?: ((container: PooledContainer) => Promise<boolean>) | undefined
  /** Take an adopted container into the pool (called as each is adopted). */
  keep: (container: PooledContainer) => void
  /** The current pool spec's hash: an idle container made from another is removed, not adopted. */
  specHash?: string | undefined
}

/**
 * Match the engine's containers (by label) with the persisted records: adopt idle ones
 * that still run and in-use ones `adopt` vouches for; remove every other container and
 * drop records whose container is gone.
 *
 * @example
 * ```ts
 * const { adopted, removed } = await recoverPool({ runtime, store, logger, name: 'berth-1c0e5f2a', keep: (c) => containers.set(c.id, c) })
 * ```
 */
export async function recoverPool(o: RecoverOptions): Promise<{ adopted: number; removed: number }> {
  const found = await o.runtime.list({ labels: { [MANAGED_LABEL]: 'true', 'berth.pool': o.name }, all: true })
  const keys = await o.store.keys(`pool:${o.name}:`)
  const records = new Map(
    (await o.store.getMany<PooledContainer>(keys))
      .filter((r): r is PooledContainer => r !== null)
      .map((r) => [r.id, r]),
  )
  let adopted = 0
  let removed = 0
  for (const summary of found) {
    const record = records.get(summary.labels['berth.container'] ?? '')
    records.delete(record?.id ?? '')
    const alive = summary.state === 'running'
    const keep =
      record !== undefined &&
      record.engine_id === summary.id &&
      alive &&
      (record.state === 'idle'
        ? o.specHash === undefined || summary.labels[SPEC_LABEL] === o.specHash
        : o.adopt
          ? await o.adopt(record).catch(() => false)
          : false)
    if (keep) {
      o.keep(record)
      adopted++
      continue
    }
    await o.runtime
      .remove(summary.id)
      .catch((err) => o.logger.warn('could not remove orphan container', { id: summary.id, error: String(err) }))
    if (record) await o.store.remove(poolKey(o.name, record.id))
    removed++
  }
  for (const stale of records.values()) await o.store.remove(poolKey(o.name, stale.id))
  if (adopted || removed) o.logger.info('pool recovered', { pool: o.name, adopted, removed })
  return { adopted, removed }
}
