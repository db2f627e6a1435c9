/** Environments: what an agent's container is made of, where it may connect, its limits; images provisioned once per content hash. */
import {
  ApiError,
  validationError,
  newId,
  Environment,
  type CreateEnvironment,
  type ImageStatus,
  type Isolation,
  type UpdateEnvironment,
} from '@berth/contract'
import { isoNow, type Clock } from '../ports/clock.js'
import type { ContainerSpec, EgressPolicy } from '../ports/container-runtime.js'
import type { Logger } from '../ports/logger.js'
import type { Store } from '../ports/store.js'
import { OwnedCollection, type OwnedRecord, type Page, type Paged } from '../records/collection.js'
import { toView } from '../records/view.js'
import {
  checkCaps,
  diskLimits,
  effectiveIsolation,
  normalizeEnvironment,
  type EnvironmentCaps,
  type EnvironmentFields,
} from './environment-caps.js'

export interface EnvironmentRecord extends OwnedRecord, Omit<Environment, 'id' | 'created_at' | 'updated_at'> {}

/** How an environment's image comes to exist: planned (ref and content hash) without work, built once per hash. */
export interface EnvironmentImages {
  /** The operator's image (the default environment's). */
  readonly defaultRef: string
  /**
   * The image for an `image`/`packages` pair: its ref and hash, and how to provision it.
   * Throws a VALIDATION_FAILED ApiError for packages it cannot provide.
   */
  plan(input: { image: string | null; packages: readonly string[] }): {
    ref: string
    hash: string | null
    provision(): Promise<void>
  }
}

/** What a task's container is created with, resolved from the profile's environment. */
export interface ResolvedEnvironment {
  /** `null` for the operator's default environment (served by warm containers). */
  id: string | null
  /** Spec fields for the pool: image, egress, limits, env, the `berth.environment` label. */
  spec: Partial<ContainerSpec>
  network: EgressPolicy
}

const MB = 1024 * 1024

/** The log tail kept with a failed image. */
function tail(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err)
  return text.length > 2000 ? text.slice(-2000) : text
}

/**
 * Environments: what an agent's container is made of (image, or the host image plus
 * packages), where it may connect (`none`, `public`, `allowlist`), its resource limits
 * and non-secret environment variables. Owner-scoped; every limit and policy is checked
 * against the operator's caps (400 naming the field). Images are provisioned once per
 * content hash in the background; their state shows as `image_status`.
 *
 * @example
 * ```ts
 * const env = await environments.create(caller.id, { name: 'py', packages: ['python3'], network: { policy: 'allowlist', allow: [{ host: 'pypi.org', ports: [443] }] } })
 * ```
 */
export class EnvironmentsService {
  readonly records: OwnedCollection<EnvironmentRecord>
  /** Profiles, read only: which name an environment. */
  private readonly profiles: OwnedCollection<OwnedRecord & { environment_id?: string | null }>
  /** Provisioning runs by image ref + hash: each is built once, concurrent callers share it. */
  private readonly builds = new Map<string, Promise<void>>()

  constructor(
    private readonly o: {
      store: Store
      clock: Clock
      logger: Logger
      caps: EnvironmentCaps
      images?: EnvironmentImages | undefined
      /**
       * The isolation levels the container runtime gives now, with its name (see
       * `ContainerRuntime.isolations`); without it (no runtime) nothing is checked.
       */
      isolations?: { runtime: string; levels: () => Promise<readonly Isolation[]> } | undefined
    },
  ) {
    this.records = new OwnedCollection<EnvironmentRecord>(o.store, 'environments', 'environment')
    this.profiles = new OwnedCollection(o.store, 'profiles', 'profile')
  }

  get caps(): EnvironmentCaps {
    return this.o.caps
  }

  view(r: EnvironmentRecord): Environment {
    // Records written before the fields existed: never root, plain containers (or the operator's least).
    return toView(Environment, r, {
      run_as_root: r.run_as_root ?? false,
      isolation: effectiveIsolation(this.o.caps, r.isolation),
    })
  }

  /** The caps, and a 400 at `isolation` when the runtime cannot give the level asked for. */
  private async check(fields: EnvironmentFields): Promise<void> {
    checkCaps(this.o.caps, fields)
    const probe = this.o.isolations
    if (fields.isolation === 'container' || !probe) return
    const levels = await probe.levels()
    if (!levels.includes(fields.isolation))
      throw validationError([
        {
          location: 'body',
          path: 'isolation',
          message: `the ${probe.runtime} runtime of this server cannot give ${fields.isolation} isolation (it needs Docker or Podman with runsc registered: scripts/gvisor/ensure.sh)`,
        },
      ])
  }

  private imageFor(image: string | null, packages: readonly string[]): { ref: string; hash: string | null } {
    if (!this.o.images) return { ref: image ?? 'default', hash: null }
    const { ref, hash } = this.o.images.plan({ image, packages })
    return { ref, hash }
  }

  /** Provision the record's image in the background (once per ref + hash) and record the outcome. */
  private startBuild(r: EnvironmentRecord): Promise<void> {
    const images = this.o.images
    if (!images) return Promise.resolve()
    const plan = images.plan({ image: r.image, packages: r.packages })
    const key = `${plan.ref}#${plan.hash ?? ''}`
    let build = this.builds.get(key)
    if (!build) {
      build = plan.provision()
      this.builds.set(key, build)
      // A failure is not cached: the next submit or update tries again.
      build.catch(() => this.builds.delete(key))
    }
    const settle = async (status: ImageStatus) => {
      const current = await this.records.find(r.owner_id, r.id)
      // Only the image this run was for (an update may have asked for another meanwhile).
      if (!current || current.image_status.ref !== plan.ref || current.image_status.hash !== plan.hash) return
      await this.records.put({ ...current, image_status: status })
    }
    return build.then(
      () => settle({ ref: plan.ref, hash: plan.hash, state: 'ready', log_tail: null }),
      async (err: unknown) => {
        this.o.logger.warn('could not provision an environment image', {
          environment: r.id,
          image: plan.ref,
          error: tail(err).slice(0, 300),
        })
        await settle({ ref: plan.ref, hash: plan.hash, state: 'failed', log_tail: tail(err) })
        throw err
      },
    )
  }

  async create(owner: string, input: CreateEnvironment): Promise<Environment> {
    const fields = normalizeEnvironment(input, this.o.caps)
    await this.check(fields)
    const { ref, hash } = this.imageFor(fields.image, fields.packages)
    const now = isoNow(this.o.clock)
    const record: EnvironmentRecord = {
      id: newId('environment'),
      owner_id: owner,
      ...fields,
      image_status: { ref, hash, state: this.o.images ? 'building' : 'ready', log_tail: null },
      created_at: now,
      updated_at: now,
    }
    await this.records.put(record)
    this.startBuild(record).catch(() => {})
    return this.view(record)
  }

  async get(owner: string, id: string): Promise<Environment> {
    return this.view(await this.records.get(owner, id))
  }

  async list(owner: string, page: Page): Promise<Paged<Environment>> {
    const { items, total, next } = await this.records.list(owner, page)
    return { items: items.map((r) => this.view(r)), total, next }
  }

  async update(owner: string, id: string, input: UpdateEnvironment): Promise<Environment> {
    const r = await this.records.get(owner, id)
    const fields = normalizeEnvironment({ ...input, name: input.name ?? r.name }, this.o.caps, r)
    await this.check(fields)
    const { ref, hash } = this.imageFor(fields.image, fields.packages)
    const changed = ref !== r.image_status.ref || hash !== r.image_status.hash || r.image_status.state === 'failed'
    const next: EnvironmentRecord = {
      ...r,
      ...fields,
      image_status: changed ? { ref, hash, state: 'building', log_tail: null } : r.image_status,
      updated_at: isoNow(this.o.clock),
    }
    await this.records.put(next)
    if (changed) this.startBuild(next).catch(() => {})
    return this.view(next)
  }

  /**
   * Delete the environment. Refused (400) while a profile names it: falling back to the
   * default environment could widen what that profile's agents may reach.
   */
  async remove(owner: string, id: string): Promise<void> {
    await this.records.get(owner, id)
    const users = (await this.profiles.all(owner)).filter((p) => p.environment_id === id)
    if (users.length) {
      throw validationError([
        {
          location: 'params',
          path: 'id',
          message: `environment ${id} is used by profile ${users.map((p) => p.id).join(', ')}; point them elsewhere first`,
        },
      ])
    }
    await this.records.remove(owner, id)
  }

  /** 400 for an environment id that is not the caller's (profiles reference environments). */
  async assertOwn(owner: string, id: string, path = 'environment_id'): Promise<void> {
    if (!(await this.records.find(owner, id)))
      throw validationError([{ location: 'body', path, message: `environment ${id} does not exist` }])
  }

  /** At submit: 400 when the environment's image failed to build (the log tail in `details`). */
  async assertRunnable(owner: string, id: string | null | undefined): Promise<void> {
    if (!id) return
    const r = await this.records.find(owner, id)
    if (r?.image_status.state === 'failed') {
      throw new ApiError(
        'VALIDATION_FAILED',
        `The image of environment ${id} failed to build; fix the environment (PATCH it to try again)`,
        {
          issues: [
            { location: 'body', path: 'profile_id', message: `environment ${id}: image ${r.image_status.ref} failed` },
          ],
          environment_id: id,
          log_tail: r.image_status.log_tail,
        },
      )
    }
  }

  /** The memory cap of the environment's containers in bytes; undefined for the default environment (the pool's own). */
  async memoryBytes(owner: string, id: string | null | undefined): Promise<number | undefined> {
    if (!id) return undefined
    const r = await this.records.find(owner, id)
    if (!r) return undefined
    return (r.limits.memory_mb ?? this.caps.defaults.memory_mb) * MB
  }

  /**
   * What a task's container is made of: the profile's environment (its image provisioned
   * first), or the operator's default when the profile names none.
   * `extraHosts` (the model endpoint, remote MCP servers) join an allowlist.
   */
  async resolve(
    owner: string,
    id: string | null | undefined,
    extraHosts: readonly string[] = [],
  ): Promise<ResolvedEnvironment> {
    const r = id ? await this.records.find(owner, id) : null
    // Never a silent fallback to the (possibly wider) default.
    if (id && !r) throw new ApiError('CONTAINER_FAILED', `The profile's environment ${id} no longer exists`)
    const { caps } = this.o
    if (!r) {
      // Warm containers serve the default environment, unless its allowlist must name this
      // task's model endpoint: then the container is made for the task.
      if (caps.defaultPolicy !== 'allowlist') return { id: null, network: { policy: caps.defaultPolicy }, spec: {} }
      const network: EgressPolicy = {
        policy: 'allowlist',
        allow: extraHosts.map((host) => ({ host })),
        allowPrivate: caps.allowPrivateDestinations,
      }
      return { id: null, network, spec: { egress: network } }
    }
    if (r.image_status.state !== 'ready') {
      await this.startBuild(r).catch((err: unknown) => {
        throw new ApiError(
          'CONTAINER_FAILED',
          `The image of environment ${r.id} could not be provisioned: ${tail(err).slice(0, 500)}`,
        )
      })
    }
    const network: EgressPolicy =
      r.network.policy === 'allowlist'
        ? {
            policy: 'allowlist',
            allow: [
              ...r.network.allow.map((a) => ({ host: a.host, ports: a.ports })),
              ...extraHosts.map((host) => ({ host })),
            ],
            allowPrivate: caps.allowPrivateDestinations,
          }
        : { policy: r.network.policy }
    const l = { ...caps.defaults, ...Object.fromEntries(Object.entries(r.limits).filter(([, val]) => val !== null)) }
    return {
      id: r.id,
      network,
      spec: {
        image: r.image_status.ref,
        egress: network,
        limits: { cpus: l.cpus, memoryBytes: l.memory_mb * MB, pids: l.pids, ...diskLimits(caps, r.limits.disk_mb) },
        env: { ...r.env },
        ...(r.run_as_root && caps.allowRoot && { user: '0:0' }),
        // Only when asked: a spec without it hashes as before the field existed.
        ...(effectiveIsolation(caps, r.isolation) === 'gvisor' && { isolation: 'gvisor' as const }),
        labels: { 'berth.environment': r.id },
      },
    }
  }
}
