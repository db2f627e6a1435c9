/** Creating a pooled container: its spec and `berth.*` labels, the engine calls, and the record a restart accounts for it by. */
import { createHash } from 'node:crypto'
import { ApiError } from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import { IDLE_COMMAND, MANAGED_LABEL, type ContainerRuntime, type ContainerSpec } from '../ports/container-runtime.js'
import { isContainerError } from './errors.js'
import { DEFAULT_CONTAINER_MEMORY_BYTES } from './pool-memory.js'
import type { Store } from '../ports/store.js'
import type { PoolImage } from './pool-image.js'
import { poolKey, type ClaimRequest, type PooledContainer } from './pool-options.js'

/**
 * The spec to create container `id` from: idle command and `/workspace` by default, the
 * pool's `base` then the claim's spec on top (mounts and env merged), and the labels
 * naming the pool, the container, and for a claim its owner and workspace.
 *
 * @example
 * ```ts
 * containerSpec({ name: 'berth-1c0e5f2a', image: 'berth-runner' }, 'ctr_abc')
 * // { cmd: IDLE_COMMAND, workingDir: '/workspace', image: 'berth-runner', labels: { 'berth.pool': 'berth-1c0e5f2a', … } }
 * ```
 */
/** The label of a warm container: the hash of the pool spec it was made from (see {@link specHash}). */
export const SPEC_LABEL = 'berth.spec'

/**
 * A short hash of what a warm container is made of (image, mounts, user, limits, network,
 * env): an idle container from a different spec (an upgrade that mounts something new, a
 * changed agent user) is not adopted after a restart.
 *
 * @example
 * ```ts
 * specHash({ name: 'p', image: 'berth-runner' }) === specHash({ name: 'p', image: 'berth-runner' }) // true
 * ```
 */
export function specHash(pool: { image: string; spec?: Partial<ContainerSpec> | undefined }): string {
  const { labels: _labels, ...spec } = pool.spec ?? {}
  return createHash('sha256')
    .update(JSON.stringify([pool.image, spec]))
    .digest('hex')
    .slice(0, 16)
}

export function containerSpec(
  pool: { name: string; image: string; spec?: Partial<ContainerSpec> | undefined },
  id: string,
  req?: ClaimRequest,
): ContainerSpec {
  const base = pool.spec ?? {}
  return {
    cmd: [...IDLE_COMMAND],
    workingDir: '/workspace',
    ...base,
    ...req?.spec,
    image: req?.spec?.image ?? pool.image,
    mounts: [...(base.mounts ?? []), ...(req?.spec?.mounts ?? [])],
    env: { ...base.env, ...req?.spec?.env },
    labels: {
      ...base.labels,
      ...req?.spec?.labels,
      ...req?.labels,
      [MANAGED_LABEL]: 'true',
      'berth.pool': pool.name,
      ...(!req?.spec && { [SPEC_LABEL]: specHash(pool) }),
      'berth.container': id,
      ...(req && { 'berth.owner': req.owner_id }),
      ...(req?.workspace_id && { 'berth.workspace': req.workspace_id }),
    },
  }
}

/** What creating a container needs from its pool. */
export interface CreateContext {
  runtime: ContainerRuntime
  store: Store
  clock: Clock
  pool: { name: string; image: string; spec?: Partial<ContainerSpec> | undefined }
  /** The pool's image, provisioned before the first container made from it. */
  image: PoolImage
  /** The engine stopped answering. */
  lost: (err: unknown) => void
  /** Whether the pool shut down (a container made meanwhile is removed at once). */
  closed: () => boolean
}

/**
 * Create and start container `id` and persist its record: idle, or in use at once when
 * made for a claim. A container that fails to start, or starts after shutdown, is removed.
 *
 * @example
 * ```ts
 * const record = await createContainer(ctx, newId('container'), { owner_id: 'usr_1', purpose: 'batch' })
 * record.state // 'in_use'
 * ```
 */
export async function createContainer(c: CreateContext, id: string, req?: ClaimRequest): Promise<PooledContainer> {
  const spec = containerSpec(c.pool, id, req)
  if (spec.image === c.pool.image) await c.image.ready()
  let engineId: string
  try {
    engineId = (await c.runtime.create(spec)).id
  } catch (err) {
    // Removed since it was provisioned: provision again next time.
    if (isContainerError(err, 'not_found') && spec.image === c.pool.image) c.image.invalidate()
    if (isContainerError(err, 'unreachable')) c.lost(err)
    throw err
  }
  try {
    await c.runtime.start(engineId)
    // Shut down meanwhile: nobody will release this one, so it must not outlive us.
    if (c.closed()) throw new ApiError('CONTAINER_FAILED', 'The container pool is shut down')
  } catch (err) {
    await c.runtime.remove(engineId).catch(() => {})
    throw err
  }
  const record: PooledContainer = {
    id,
    engine_id: engineId,
    // Made for a claim: in use at once, so no other claim (nor the warm-up count) takes
    // it in the moment before `lease` records its holder.
    state: req ? 'in_use' : 'idle',
    owner_id: null,
    workspace_id: null,
    purpose: null,
    created_at: isoNow(c.clock),
    claimed_at: null,
    memory_bytes: spec.limits?.memoryBytes ?? DEFAULT_CONTAINER_MEMORY_BYTES,
  }
  await c.store.set(poolKey(c.pool.name, id), record)
  return record
}
