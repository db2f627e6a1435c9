/** The operator's caps on environments, and an environment's input normalized and checked against them. */
import {
  validationError,
  type ValidationIssue,
  type CreateEnvironment,
  type Environment,
  type Isolation,
  type NetworkPolicy,
} from '@berth/contract'
import { touchesPrivateRange } from '../net/private-ranges.js'

/** The fields of an environment its input sets (the rest are the record's own). */
export type EnvironmentFields = Pick<
  Environment,
  'name' | 'description' | 'image' | 'packages' | 'network' | 'limits' | 'env' | 'run_as_root' | 'isolation'
>

/** The operator's caps and defaults (standalone: `BERTH_ENV_*`). */
export interface EnvironmentCaps {
  /** Policy of the default environment and of environments that name none (default `public`). */
  defaultPolicy: NetworkPolicy
  /** Policies callers may choose (default all three). */
  allowedPolicies: readonly NetworkPolicy[]
  /** The most a caller may ask for; `null`: no cap. */
  max: { cpus: number | null; memory_mb: number | null; pids: number | null; disk_mb: number | null }
  /**
   * Limits of containers whose environment sets none. `disk_mb` sizes the workspace (where
   * the runtime can make a sized disk; `null`: unlimited), `tmp_mb` the tmpfs at `/tmp` of
   * every container (memory, counted against `memory_mb`).
   */
  defaults: { cpus: number; memory_mb: number; pids: number; disk_mb?: number | null; tmp_mb?: number }
  /**
   * Let an allowlist (and the model endpoint it adds) name private, loopback, link-local or
   * metadata addresses (default false: refused, 400 for a literal address, a failed
   * container for a name that resolves to one).
   */
  allowPrivateDestinations?: boolean
  /** Let an environment ask for `run_as_root` (default false: the agent is never root). */
  allowRoot?: boolean
  /**
   * The least isolation of every container (default `container`); `gvisor` puts every
   * task, the default environment's warm containers included, under gVisor.
   */
  isolation?: Isolation
}

/** Caps when the deployment sets none: every policy offered, `public` by default, 4 CPUs, 8 GiB, 4096 pids, 20 GiB disk (4 GiB and 512 MiB of `/tmp` by default). */
export const DEFAULT_ENVIRONMENT_CAPS: EnvironmentCaps = {
  defaultPolicy: 'public',
  allowedPolicies: ['none', 'public', 'allowlist'],
  max: { cpus: 4, memory_mb: 8192, pids: 4096, disk_mb: 20480 },
  defaults: { cpus: 2, memory_mb: 2048, pids: 1024, disk_mb: 4096, tmp_mb: 512 },
}

/**
 * 400 naming every field beyond the operator's caps.
 *
 * @example
 * ```ts
 * checkCaps(DEFAULT_ENVIRONMENT_CAPS, { network: { policy: 'none', allow: [] }, limits: { cpus: 64, memory_mb: null, pids: null, disk_mb: null }, run_as_root: false })
 * // throws VALIDATION_FAILED at limits.cpus
 * ```
 */
export function checkCaps(
  caps: EnvironmentCaps,
  r: Pick<EnvironmentFields, 'network' | 'limits' | 'run_as_root'> & Partial<Pick<EnvironmentFields, 'isolation'>>,
): void {
  const issues: ValidationIssue[] = []
  if (r.run_as_root && !caps.allowRoot)
    issues.push({ location: 'body', path: 'run_as_root', message: 'this server does not let agents run as root' })
  if (caps.isolation === 'gvisor' && r.isolation === 'container')
    issues.push({ location: 'body', path: 'isolation', message: 'this server runs every agent under gVisor' })
  if (!caps.allowedPolicies.includes(r.network.policy)) {
    issues.push({
      location: 'body',
      path: 'network.policy',
      message: `policy "${r.network.policy}" is not offered here (allowed: ${caps.allowedPolicies.join(', ')})`,
    })
  }
  for (const k of ['cpus', 'memory_mb', 'pids', 'disk_mb'] as const) {
    const asked = r.limits[k]
    const max = caps.max[k]
    if (asked !== null && max !== null && asked > max)
      issues.push({ location: 'body', path: `limits.${k}`, message: `${asked} is above the operator's cap of ${max}` })
  }
  if (!caps.allowPrivateDestinations) {
    r.network.allow.forEach((a, i) => {
      if (touchesPrivateRange(a.host))
        issues.push({
          location: 'body',
          path: `network.allow.${i}.host`,
          message: `${a.host} reaches private, loopback, link-local or metadata addresses, which this server does not allow`,
        })
    })
  }
  if (issues.length) throw validationError(issues)
}

/**
 * The stored fields of an environment from a create (or, with `base`, an update's merged)
 * input: network hosts lower-cased and ports deduplicated, no allowlist unless the policy
 * is `allowlist`, limits defaulting to none, packages sorted and deduplicated.
 *
 * @example
 * ```ts
 * normalizeEnvironment({ name: 'py', packages: ['b', 'a', 'a'] }, DEFAULT_ENVIRONMENT_CAPS).packages // ['a', 'b']
 * ```
 */
export function normalizeEnvironment(
  input: CreateEnvironment,
  caps: EnvironmentCaps,
  base?: EnvironmentFields,
): EnvironmentFields {
  const network = input.network
    ? {
        policy: input.network.policy,
        allow: (input.network.allow ?? []).map((a) => ({
          host: a.host.toLowerCase(),
          ports: [...new Set(a.ports ?? [])],
        })),
      }
    : (base?.network ?? { policy: caps.defaultPolicy, allow: [] })
  if (network.policy !== 'allowlist') network.allow = []
  const limits = { cpus: null, memory_mb: null, pids: null, disk_mb: null, ...base?.limits, ...input.limits }
  return {
    name: input.name,
    description: input.description ?? base?.description ?? '',
    image: input.image !== undefined ? input.image : (base?.image ?? null),
    packages: input.packages ? [...new Set(input.packages)].sort() : (base?.packages ?? []),
    network,
    limits,
    env: input.env ?? base?.env ?? {},
    run_as_root: input.run_as_root ?? base?.run_as_root ?? false,
    isolation: input.isolation ?? base?.isolation ?? caps.isolation ?? 'container',
  }
}

/**
 * The isolation an environment's containers get: its own, raised to the operator's least
 * (an environment stored before the operator required gVisor gets gVisor too).
 *
 * @example
 * ```ts
 * effectiveIsolation({ ...DEFAULT_ENVIRONMENT_CAPS, isolation: 'gvisor' }, 'container') // 'gvisor'
 * ```
 */
export function effectiveIsolation(caps: EnvironmentCaps, isolation: Isolation | undefined): Isolation {
  return caps.isolation === 'gvisor' ? 'gvisor' : (isolation ?? 'container')
}

/**
 * The disk limits of a container from an environment's `disk_mb` (or the operator's
 * default), in the runtime port's terms.
 *
 * @example
 * ```ts
 * diskLimits(DEFAULT_ENVIRONMENT_CAPS, 1024) // { diskBytes: 1073741824, tmpBytes: 536870912 }
 * ```
 */
export function diskLimits(
  caps: EnvironmentCaps,
  diskMb: number | null | undefined,
): { diskBytes?: number; tmpBytes?: number } {
  const MiB = 1024 * 1024
  const disk = diskMb ?? caps.defaults.disk_mb ?? null
  const tmp = caps.defaults.tmp_mb
  return { ...(disk !== null && { diskBytes: disk * MiB }), ...(tmp !== undefined && { tmpBytes: tmp * MiB }) }
}
