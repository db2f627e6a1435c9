import { execFile } from 'node:child_process'
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os'
import { privateCidrs } from '@berth/core'

/**
 * Host firewall rules (iptables, root) that make a Berth bridge network honour its egress
 * policy. Two dispatch chains, `BERTH-FORWARD` (traffic a container sends through the
 * host) and `BERTH-INPUT` (traffic a container sends to the host itself), are jumped to
 * first thing in `FORWARD` and `INPUT`; they send each Berth bridge's packets to its own
 * chains. Only drops and rejects are decided here: what passes continues to the engine's
 * own rules (Docker's `DOCKER-*`, netavark's `NETAVARK_*`).
 */

export type Family = 4 | 6

/** The rules one bridge network needs. */
export interface BridgeRules {
  /** The bridge interface, e.g. `brb1f2e3d4c5b6a`. */
  bridge: string
  /** The gateway address on the host (DNS forwarders such as aardvark listen there). */
  gateway: string | null
  policy: 'public' | 'allowlist'
  /** Resolved allowlist: an address or CIDR with TCP ports (empty: all ports and protocols). */
  allow: { address: string; family: Family; ports: number[] }[]
  /**
   * The host's own connected networks (its LAN, other engines' bridges) that `public` also
   * refuses, as CIDRs with the network address ({@link hostNetworks}); private ones are
   * covered already and may be left out.
   */
  hostNetworks?: { cidr: string; family: Family }[]
}

const v4 = (a: string) => a.split('.').reduce((n, o) => n * 256 + Number(o), 0)
const v4text = (n: number) => [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.')

/**
 * The networks this host is connected to outside the private ranges, IPv4, as CIDRs with
 * their network address (`192.0.2.0/24` for an interface `192.0.2.2/24`), loopback
 * excluded: a `public` container may reach the internet, not the machines beside its host.
 *
 * @example
 * ```ts
 * hostNetworks({ eth0: [{ address: '192.0.2.2', netmask: '255.255.255.0', family: 'IPv4', cidr: '192.0.2.2/24', internal: false, mac: '' }] })
 * // [{ cidr: '192.0.2.0/24', family: 4 }]
 * ```
 */
export function hostNetworks(
  interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces(),
): { cidr: string; family: Family }[] {
  const out = new Set<string>()
  for (const list of Object.values(interfaces))
    for (const i of list ?? []) {
      if (i.internal || i.family !== 'IPv4' || !i.cidr) continue
      const bits = Number(i.cidr.split('/')[1])
      const size = 2 ** (32 - bits)
      const cidr = `${v4text(Math.floor(v4(i.address) / size) * size)}/${bits}`
      if (bits > 0 && !privateCidrs(4).some((p) => covers(p, cidr))) out.add(cidr)
    }
  return [...out].sort().map((cidr) => ({ cidr, family: 4 as const }))
}

/** Whether IPv4 CIDR `outer` contains `inner`. */
function covers(outer: string, inner: string): boolean {
  const [oa, ob] = outer.split('/') as [string, string]
  const [ia, ib] = inner.split('/') as [string, string]
  if (Number(ib) < Number(ob)) return false
  const size = 2 ** (32 - Number(ob))
  return Math.floor(v4(ia) / size) === Math.floor(v4(oa) / size)
}

const DISPATCH = { FORWARD: 'BERTH-FORWARD', INPUT: 'BERTH-INPUT' } as const

/**
 * The last rule of each dispatch chain: a Berth bridge (`brb…`) without a rule of its own
 * there (its rules being installed or removed) gets nothing through (fail closed), never
 * the engine's rules alone. A bridge's own rule is a goto, so what its chain lets through
 * never reaches this.
 */
export function catchAllRule(dispatch: string, family: Family): string {
  const reject = family === 4 ? 'icmp-port-unreachable' : 'icmp6-port-unreachable'
  return `-A ${dispatch} -i brb+ -j REJECT --reject-with ${reject}`
}

function run(bin: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(bin, ['-w', ...args], { encoding: 'utf8', timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${bin} ${args.join(' ')}: ${(stderr || err.message).trim()}`))
      else resolve(stdout)
    })
  })
}

/** The per-bridge chain names: `BERTH-<bridge>-F` / `-I` (iptables allows 28 characters). */
export function chainNames(bridge: string): { forward: string; input: string } {
  const tag = bridge.replace(/^brb/, '').slice(0, 12)
  return { forward: `BERTH-${tag}-F`, input: `BERTH-${tag}-I` }
}

/**
 * The rules (as `iptables -S` prints them, chain by chain) for one bridge and family.
 *
 * @example
 * ```ts
 * bridgeRules({ bridge: 'brbabc', gateway: '10.89.0.1', policy: 'public', allow: [] }, 4).forward
 * // ['-A BERTH-abc-F -d 0.0.0.0/8 -j REJECT --reject-with icmp-port-unreachable', ...]
 * ```
 */
export function bridgeRules(r: BridgeRules, family: Family): { forward: string[]; input: string[] } {
  const names = chainNames(r.bridge)
  const reject =
    family === 4 ? '-j REJECT --reject-with icmp-port-unreachable' : '-j REJECT --reject-with icmp6-port-unreachable'
  const allowed = (chain: string) =>
    r.allow
      .filter((a) => a.family === family)
      .map((a) => {
        const dst = a.address.includes('/') ? a.address : `${a.address}/${family === 4 ? 32 : 128}`
        return a.ports.length
          ? `-A ${chain} -d ${dst} -p tcp -m multiport --dports ${a.ports.join(',')} -j RETURN`
          : `-A ${chain} -d ${dst} -j RETURN`
      })
  const forward =
    r.policy === 'allowlist'
      ? [...allowed(names.forward), `-A ${names.forward} ${reject}`]
      : // `public`: every private range and the host's own networks refused, the rest goes on to the engine's rules.
        [
          ...privateCidrs(family).map((cidr) => `-A ${names.forward} -d ${cidr} ${reject}`),
          ...(r.hostNetworks ?? [])
            .filter((n) => n.family === family)
            .map((n) => `-A ${names.forward} -d ${n.cidr} ${reject}`),
          ...(family === 6 ? [`-A ${names.forward} ${reject}`] : [`-A ${names.forward} -j RETURN`]),
        ]
  const dns =
    family === 4 && r.gateway
      ? [
          `-A ${names.input} -d ${r.gateway}/32 -p udp -m udp --dport 53 -j RETURN`,
          `-A ${names.input} -d ${r.gateway}/32 -p tcp -m tcp --dport 53 -j RETURN`,
        ]
      : []
  // The host itself is never a destination, whatever its address (the gateway, eth0's, ...),
  // but for its DNS forwarder and what an allowlist names.
  // Replies on connections the host opened (a preview's proxy to a container's port) pass;
  // a container's own new connection to the host is still refused.
  const replies = `-A ${names.input} -m conntrack --ctstate ESTABLISHED -j RETURN`
  const input = [
    replies,
    ...dns,
    ...(r.policy === 'allowlist' ? allowed(names.input) : []),
    `-A ${names.input} ${reject}`,
  ]
  return { forward, input }
}

/** The filter table as `iptables -S` prints it: the chains that exist and each one's `-A` lines. */
interface Table {
  chains: Set<string>
  rules: Map<string, string[]>
}

/**
 * Read the whole filter table in one call (one process, instead of one per chain: a task's
 * container start checks a dozen chains across two families).
 */
async function readTable(bin: string): Promise<Table> {
  const table: Table = { chains: new Set(), rules: new Map() }
  for (const line of (await run(bin, ['-S'])).split('\n')) {
    const [verb, chain] = line.split(' ', 2)
    if (!chain) continue
    if (verb === '-N' || verb === '-P') table.chains.add(chain)
    else if (verb === '-A') table.rules.set(chain, [...(table.rules.get(chain) ?? []), line])
  }
  return table
}

/** Feed `input` to `<bin>-restore --noflush`: one transaction, applied whole or not at all. */
function restore(bin: string, input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile(`${bin}-restore`, ['-w', '--noflush'], { timeout: 30_000 }, (err, _out, stderr) => {
      if (err) reject(new Error(`${bin}-restore: ${(stderr || err.message).trim()}`))
      else resolve()
    })
    child.stdin?.end(input)
  })
}

/**
 * Create the chain if missing and make its rules exactly `rules`, in one transaction
 * (`iptables-restore --noflush`): the chain is never seen with part of its rules, and
 * servers syncing the same chain at once (instances on one host) cannot interleave.
 */
async function syncChain(bin: string, table: Table, chain: string, rules: string[]): Promise<void> {
  const current = table.rules.get(chain) ?? []
  if (table.chains.has(chain) && current.length === rules.length && current.every((l, i) => l === rules[i])) return
  await restore(bin, ['*filter', `:${chain} - [0:0]`, `-F ${chain}`, ...rules, 'COMMIT', ''].join('\n'))
}

/** Make `rule` (an `-A <chain> …` line) the last rule of its chain; drop other copies. */
async function ensureLast(bin: string, table: Table, chain: string, rule: string): Promise<void> {
  const lines = table.rules.get(chain) ?? []
  const copies = lines.filter((l) => l === rule).length
  if (lines.at(-1) === rule && copies === 1) return
  await run(bin, rule.split(' '))
  // By spec, not by number (a jump may have been inserted above): each removes the first copy, an old one.
  for (let i = 0; i < copies; i++) await run(bin, ['-D', ...rule.split(' ').slice(1)])
}

/** Make `rule` (an `-A <chain> …` line) the first rule of its chain; drop other copies. */
async function ensureFirst(bin: string, table: Table, chain: string, rule: string): Promise<void> {
  const lines = table.rules.get(chain) ?? []
  if (lines[0] === rule && lines.filter((l) => l === rule).length === 1) return
  await run(bin, ['-I', chain, '1', ...rule.split(' ').slice(2)])
  for (let i = lines.length + 1; i >= 2; i--) if (lines[i - 2] === rule) await run(bin, ['-D', chain, String(i)])
}

/** The binaries, per family. */
export interface FirewallOptions {
  iptables?: string
  ip6tables?: string
  /** How often `public` bridges re-read the host's networks (ms, default 5000; see egress-refresh.ts). */
  refreshMs?: number
}

/**
 * Install (idempotently) the rules of one bridge for IPv4 and IPv6, and make sure the
 * dispatch chains are hooked first in `FORWARD` and `INPUT` (engines insert their own
 * jumps at the top when they restart, so this is checked on every call).
 *
 * @example
 * ```ts
 * await installBridgeRules({ bridge: 'brbabc', gateway: '10.89.0.1', policy: 'public', allow: [] })
 * ```
 */
export async function installBridgeRules(r: BridgeRules, options: FirewallOptions = {}): Promise<void> {
  for (const family of [4, 6] as const)
    await applyBridge(binOf(family, options), family, r.bridge, bridgeRules(r, family))
}

const binOf = (family: Family, options: FirewallOptions) =>
  family === 4 ? (options.iptables ?? 'iptables') : (options.ip6tables ?? 'ip6tables')

/** One family's chains of a bridge made exactly `rules`, its jumps in the dispatch chains, the dispatch hooked first. */
async function applyBridge(
  bin: string,
  family: Family,
  bridge: string,
  rules: { forward: string[]; input: string[] },
): Promise<void> {
  const names = chainNames(bridge)
  // One read of the table; each step below touches its own chains, so it stays true for them.
  const table = await readTable(bin)
  await syncChain(bin, table, names.forward, rules.forward)
  await syncChain(bin, table, names.input, rules.input)
  for (const [hook, dispatch] of Object.entries(DISPATCH)) {
    if (!table.chains.has(dispatch)) await run(bin, ['-N', dispatch]).catch(() => {}) // made meanwhile
    const target = hook === 'FORWARD' ? names.forward : names.input
    const { jump, legacy } = jumps(dispatch, bridge, target)
    const present = table.rules.get(dispatch) ?? []
    // Above the catch-all, which stays last.
    if (!present.includes(jump)) await run(bin, ['-I', dispatch, '1', ...jump.split(' ').slice(2)])
    for (const l of present) if (l === legacy) await run(bin, ['-D', ...legacy.split(' ').slice(1)])
    await ensureLast(bin, table, dispatch, catchAllRule(dispatch, family))
    await ensureFirst(bin, table, hook, `-A ${hook} -j ${dispatch}`)
  }
}

/**
 * A bridge's rule in a dispatch chain: a goto, so that its chain's `RETURN` (allowed
 * traffic) goes back to `FORWARD`/`INPUT`, past the catch-all. `legacy`: the jump of
 * earlier versions, replaced where found.
 */
function jumps(dispatch: string, bridge: string, target: string): { jump: string; legacy: string } {
  return { jump: `-A ${dispatch} -i ${bridge} -g ${target}`, legacy: `-A ${dispatch} -i ${bridge} -j ${target}` }
}

/** A bridge's rules as they were before {@link removeBridgeRules}, per family, to put back. */
export type SavedBridgeRules = Partial<Record<Family, { forward: string[]; input: string[] }>>

/**
 * Remove a bridge's chains and its jumps, IPv4 and IPv6, each family in one transaction (its
 * network is being removed). Returns the rules removed, for {@link restoreBridgeRules} when
 * the network turns out to be still in use. A container still on the bridge meanwhile gets
 * nothing through (the dispatch chains' catch-all), never more than its policy.
 *
 * @example
 * ```ts
 * const saved = await removeBridgeRules('brbabc')
 * ```
 */
export async function removeBridgeRules(bridge: string, options: FirewallOptions = {}): Promise<SavedBridgeRules> {
  const names = chainNames(bridge)
  const saved: SavedBridgeRules = {}
  for (const family of [4, 6] as const) {
    const bin = binOf(family, options)
    const table = await readTable(bin)
    const lines = ['*filter']
    for (const [hook, dispatch] of Object.entries(DISPATCH)) {
      const { jump, legacy } = jumps(dispatch, bridge, hook === 'FORWARD' ? names.forward : names.input)
      for (const l of table.rules.get(dispatch) ?? []) if (l === jump || l === legacy) lines.push(`-D${l.slice(2)}`)
    }
    for (const chain of [names.forward, names.input])
      if (table.chains.has(chain)) lines.push(`-F ${chain}`, `-X ${chain}`)
    if (!table.chains.has(names.forward) && !table.chains.has(names.input) && lines.length === 1) continue
    saved[family] = { forward: table.rules.get(names.forward) ?? [], input: table.rules.get(names.input) ?? [] }
    await restore(bin, [...lines, 'COMMIT', ''].join('\n'))
  }
  return saved
}

/**
 * Put back what {@link removeBridgeRules} removed (its network could not be removed: a
 * container joined it meanwhile).
 *
 * @example
 * ```ts
 * await restoreBridgeRules('brbabc', saved)
 * ```
 */
export async function restoreBridgeRules(
  bridge: string,
  saved: SavedBridgeRules,
  options: FirewallOptions = {},
): Promise<void> {
  for (const family of [4, 6] as const) {
    const rules = saved[family]
    if (rules) await applyBridge(binOf(family, options), family, bridge, rules)
  }
}

/**
 * Re-check only that the dispatch chains are still jumped to first (cheap; after a
 * container start, when an engine may have re-inserted its own rules).
 *
 * @example
 * ```ts
 * await ensureDispatchFirst()
 * ```
 */
export async function ensureDispatchFirst(options: FirewallOptions = {}): Promise<void> {
  for (const bin of [options.iptables ?? 'iptables', options.ip6tables ?? 'ip6tables']) {
    const table = await readTable(bin)
    for (const [hook, dispatch] of Object.entries(DISPATCH))
      await ensureFirst(bin, table, hook, `-A ${hook} -j ${dispatch}`)
  }
}
