import { createHash } from 'node:crypto'
import { lookup } from 'node:dns/promises'
import { isIP } from 'node:net'
import { ContainerError, MANAGED_LABEL, touchesPrivateRange, type EgressPolicy, type PrunedNetwork } from '@berth/core'
import type { EngineContext } from './context.js'
import {
  chainNames,
  ensureDispatchFirst,
  hostNetworks,
  installBridgeRules,
  removeBridgeRules,
  restoreBridgeRules,
  type BridgeRules,
  type FirewallOptions,
} from './firewall.js'
import { hostNetworkRefresher } from './egress-refresh.js'
import { statusOf } from './errors.js'

/** The label a Berth egress network carries: its policy. */
export const EGRESS_LABEL = 'berth.egress'

/**
 * The network of a policy: `berth-public`, `berth-allow-<hash of the allowlist>`, or
 * Docker's `none`; and the bridge interface it gets (`brb` + 12 hex, named so the firewall
 * can match it before the engine creates it).
 *
 * @example
 * ```ts
 * egressNetwork({ policy: 'public' }, 'podman') // { name: 'berth-public', bridge: 'brb…' }
 * ```
 */
export function egressNetwork(policy: EgressPolicy, engine = 'docker'): { name: string; bridge: string } | null {
  if (policy.policy === 'none') return null
  const allow = (policy.allow ?? [])
    .map((a) => `${a.host.toLowerCase()}:${[...(a.ports ?? [])].sort((x, y) => x - y).join(',')}`)
    .sort()
  // Stable across versions for `public` (an existing berth-public keeps its bridge name).
  const key =
    policy.policy === 'allowlist'
      ? ['allowlist', allow, ...(policy.allowPrivate ? ['private'] : [])]
      : [policy.policy, []]
  // The engine is part of the bridge's name: Docker and Podman on one host each need their
  // own bridge device (one engine tearing down its network must never take the other's).
  const hash = createHash('sha256')
    .update(JSON.stringify([engine, ...key]))
    .digest('hex')
    .slice(0, 12)
  return { name: policy.policy === 'public' ? 'berth-public' : `berth-allow-${hash}`, bridge: `brb${hash}` }
}

/** How long an unused allowlist network is kept (a container may be about to join it). */
export const EGRESS_SWEEP_GRACE_MS = 60_000

const ALLOW_NETWORK = /^berth-allow-([0-9a-f]{12})$/

const ok = () => true
const no = () => false

/** An existing policy network whose bridge has another name. */
class BridgeMismatch extends Error {
  constructor(readonly bridge: string) {
    super(`bridge ${bridge}`)
  }
}

/** Every address of the allowlist's entries (names resolved now; a CIDR as written). */
async function resolveAllow(policy: EgressPolicy): Promise<BridgeRules['allow']> {
  const out = await resolveEntries(policy)
  const bad = policy.allowPrivate ? undefined : out.find((a) => touchesPrivateRange(a.address))
  if (bad)
    throw new ContainerError(
      'engine_error',
      `The allowlist reaches ${bad.address}, a private, loopback, link-local or metadata address, which is not allowed`,
      { address: bad.address },
    )
  return out
}

async function resolveEntries(policy: EgressPolicy): Promise<BridgeRules['allow']> {
  const out: BridgeRules['allow'] = []
  for (const entry of policy.allow ?? []) {
    const [base] = entry.host.split('/')
    const family = isIP(base!)
    if (family) {
      out.push({ address: entry.host, family: family as 4 | 6, ports: entry.ports ?? [] })
      continue
    }
    let found: { address: string; family: number }[]
    try {
      found = await lookup(entry.host, { all: true, verbatim: true })
    } catch {
      // Not resolvable now: no rule lets it through (safe), and the task still runs.
      continue
    }
    for (const a of found) out.push({ address: a.address, family: a.family as 4 | 6, ports: entry.ports ?? [] })
  }
  return out
}

/**
 * Makes a policy real on an Engine-API engine: the policy's bridge network (created once,
 * IPv4 only, no inter-container traffic) and its host firewall rules (installed or
 * repaired on every container created on it). `none` needs neither: the container gets
 * Docker's `none` network mode (loopback only).
 *
 * @example
 * ```ts
 * const egress = egressEnforcer(ctx)
 * const mode = await egress.networkFor({ policy: 'public' }) // 'berth-public'
 * ```
 */
export function egressEnforcer(
  ctx: EngineContext,
  firewall: FirewallOptions = {},
  opts: { sweepGraceMs?: number } = {},
) {
  const networks = new Map<string, Promise<{ gateway: string | null }>>()
  /** Networks a container is being made on here, by name → how many: never swept. */
  const joining = new Map<string, number>()
  let sweeping: Promise<number> | null = null
  let swept = false
  /** The `public` bridges ruled here, with the host networks their rules last refused. */
  const publics = new Map<string, { gateway: string | null; refused: string }>()
  const refresher = hostNetworkRefresher(publics, firewall)

  async function ensureNetwork(name: string, bridge: string, policy: string): Promise<{ gateway: string | null }> {
    const inspect = async () => {
      const info = (await ctx.docker.getNetwork(name).inspect()) as {
        IPAM?: { Config?: { Gateway?: string; Subnet?: string }[] }
        Options?: Record<string, string>
      }
      const bridgeName = info.Options?.['com.docker.network.bridge.name']
      // Podman reports options it honoured only in its own API; the name is ours either way.
      if (bridgeName && bridgeName !== bridge) throw new BridgeMismatch(bridgeName)
      return { gateway: info.IPAM?.Config?.[0]?.Gateway ?? null }
    }
    try {
      return await inspect()
    } catch (err) {
      if (err instanceof BridgeMismatch) {
        // Made by an earlier Berth with another bridge name: replace it while nothing uses it.
        await ctx.docker
          .getNetwork(name)
          .remove()
          .catch((e: unknown) => {
            throw new ContainerError(
              'engine_error',
              `Network ${name} exists with bridge ${err.bridge}, not ${bridge}, and could not be replaced (${(e as Error).message}); remove it`,
              { network: name },
            )
          })
      } else if (statusOf(err) !== 404) throw err
    }
    try {
      await ctx.docker.createNetwork({
        Name: name,
        Driver: 'bridge',
        CheckDuplicate: true,
        EnableIPv6: false,
        Labels: { [MANAGED_LABEL]: 'true', [EGRESS_LABEL]: policy },
        Options: { 'com.docker.network.bridge.name': bridge, 'com.docker.network.bridge.enable_icc': 'false' },
      })
    } catch (err) {
      if (statusOf(err) !== 409) throw err // created meanwhile by another server
    }
    const found = await inspect()
    // Docker fills the gateway at once; Podman's compat inspect may omit it until first use.
    return found
  }

  /** Whether an allowlist network is still there (another server's sweep may have taken it); a `public` one always is. */
  async function exists(name: string): Promise<boolean> {
    if (!ALLOW_NETWORK.test(name)) return true
    try {
      await ctx.docker.getNetwork(name).inspect()
      return true
    } catch (err) {
      if (statusOf(err) === 404) return false
      throw err
    }
  }

  function joined(name: string): void {
    const n = (joining.get(name) ?? 0) - 1
    if (n > 0) joining.set(name, n)
    else joining.delete(name)
  }

  /**
   * Remove the allowlist networks no container uses (in any state) that are older than the
   * grace, with their firewall chains: an allowlist is hashed into its network's name, so
   * every new one (a caller's environment, a test's port) makes a network, and an engine's
   * address pools hold a few dozen (see `removeUnused`). Safe with other servers on the
   * same engine sweeping or making containers: one whose network went is made again
   * (`createOn` makes it again, once).
   */
  async function sweepOnce(graceMs: number): Promise<number> {
    const list = await allowlistNetworks()
    let removed = 0
    for (const n of list) {
      const hash = ALLOW_NETWORK.exec(n.Name)?.[1]
      if (!hash || joining.has(n.Name)) continue
      const created = Date.parse(n.Created ?? '')
      if (!Number.isFinite(created) || Date.now() - created < graceMs) continue
      if ((await usersOf(n.Name)).length > 0) continue
      if (await removeUnused(n.Name, hash).then(ok, no)) removed++
    }
    return removed
  }

  /** Docker lets a network go under a container that is created but not started: ask by reference. */
  const usersOf = (name: string) =>
    ctx.docker.listContainers({ all: true, filters: { network: [name] } }) as Promise<
      { Names?: string[]; Labels?: Record<string, string> }[]
    >
  const allowlistNetworks = () =>
    ctx.docker.listNetworks({
      filters: { label: [`${MANAGED_LABEL}=true`, `${EGRESS_LABEL}=allowlist`] },
    }) as Promise<{ Name: string; Created?: string }[]>

  /**
   * Remove an allowlist network and its chains. The chains go first (a container joining
   * meanwhile gets nothing through, never more than its policy); when the engine then refuses
   * to remove the network (it was joined after all), they are put back and this rejects.
   */
  async function removeUnused(name: string, hash: string): Promise<void> {
    const bridge = `brb${hash}`
    const saved = await removeBridgeRules(bridge, firewall)
    try {
      await ctx.docker.getNetwork(name).remove()
    } catch (err) {
      if (statusOf(err) !== 404) {
        await restoreBridgeRules(bridge, saved, firewall)
        throw err
      }
    }
    networks.delete(name)
  }

  /**
   * The allowlist networks that only containers of `pool` use (or used: `used`), with their
   * chains: listed, and unless `dryRun` removed (a network some container still uses is reported).
   */
  async function prune(pool: string, dryRun: boolean, used?: ReadonlySet<string>): Promise<PrunedNetwork[]> {
    const out: PrunedNetwork[] = []
    for (const n of await allowlistNetworks()) {
      const hash = ALLOW_NETWORK.exec(n.Name)?.[1]
      if (!hash) continue
      const users = await usersOf(n.Name)
      if (users.some((u) => u.Labels?.['berth.pool'] !== pool)) continue
      // Unused: another deployment's between two tasks, unless this pool's containers were on it.
      if (users.length === 0 && !used?.has(n.Name)) continue
      const chains = chainNames(`brb${hash}`)
      const found = { name: n.Name, detail: `firewall chains ${chains.forward}, ${chains.input}` }
      const error = dryRun
        ? undefined
        : users.length
          ? `still used by ${users.map((u) => u.Names?.[0]?.replace(/^\//, '')).join(', ')}`
          : await removeUnused(n.Name, hash).then(
              () => undefined,
              (err: Error) => err.message,
            )
      out.push(error ? { ...found, error } : found)
    }
    return out
  }

  /** One sweep at a time; a failure is the caller's to log. */
  function sweep(graceMs = opts.sweepGraceMs ?? EGRESS_SWEEP_GRACE_MS): Promise<number> {
    sweeping ??= sweepOnce(graceMs).finally(() => {
      sweeping = null
    })
    return sweeping
  }

  return {
    /**
     * The `NetworkMode` for a policy, its network and firewall rules in place. Call
     * `joined(name)` once the container is made (or its create failed): until then the
     * network is not swept.
     */
    async networkFor(policy: EgressPolicy): Promise<string> {
      const net = egressNetwork(policy, ctx.name)
      if (!net) return 'none'
      joining.set(net.name, (joining.get(net.name) ?? 0) + 1)
      try {
        // Before the first network made here, and before each new one: the unused ones go.
        if (policy.policy === 'allowlist' && (!swept || !networks.has(net.name))) {
          swept = true
          await sweep().catch(() => 0)
        }
        let ready = networks.get(net.name)
        if (!ready) {
          ready = ensureNetwork(net.name, net.bridge, policy.policy)
          networks.set(net.name, ready)
          ready.catch(() => networks.delete(net.name))
        }
        const { gateway } = await ready
        // Read at every container made, and by the refresher between them (egress-refresh.ts).
        const host = policy.policy === 'public' ? hostNetworks() : []
        await installBridgeRules(
          {
            bridge: net.bridge,
            gateway,
            policy: policy.policy as 'public' | 'allowlist',
            allow: await resolveAllow(policy),
            hostNetworks: host,
          },
          firewall,
        )
        if (policy.policy === 'public') {
          publics.set(net.bridge, { gateway, refused: JSON.stringify(host) })
          refresher.start()
        }
        return net.name
      } catch (err) {
        joined(net.name)
        if (err instanceof ContainerError) throw err
        // Fail closed: a container whose policy cannot be enforced is not created.
        throw new ContainerError(
          'engine_error',
          `Cannot enforce the ${policy.policy} network policy: ${(err as Error).message}`,
          { runtime: ctx.name, policy: policy.policy },
        )
      }
    },
    joined,
    /**
     * Make a container with `create` on `network`, the policy's allowlist network as
     * {@link networkFor} returned it (its hold passes to this, which releases it when done).
     * Another server on the engine may have swept it since this one last used it (Podman
     * then refuses the create; Docker makes a container that cannot start): the network is
     * made again and the container with it, once.
     */
    async createOn<C extends { remove(opts: object): Promise<unknown> }>(
      policy: EgressPolicy,
      network: string,
      create: (network: string) => Promise<C>,
    ): Promise<C> {
      let held = network
      try {
        const first = await create(network).catch((err: unknown) => {
          if (/network not found/i.test((err as Error).message)) return null
          throw err
        })
        if (first && (await exists(network))) return first
        if (first) await first.remove({ force: true }).catch(() => undefined)
        networks.delete(network)
        joined(network)
        held = ''
        held = await this.networkFor(policy)
        return await create(held)
      } finally {
        if (held) joined(held)
      }
    },
    sweep,
    prune,
    /** After a start: the dispatch jumps still come first (an engine may have re-inserted its own). */
    async recheck(): Promise<void> {
      if (networks.size) await ensureDispatchFirst(firewall)
    },
    /** Stop watching the host's networks. */
    close(): void {
      refresher.stop()
    },
  }
}
