import { lookup as dnsLookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'
import { isPrivateAddress } from '../notifiers/address-policy.js'
import { type Interfaces, onHostNetwork } from './host-networks.js'
import { normalHost, type ProxyGrant } from './proxy-grant.js'

/** Every address of a host name; tests answer from a table. */
export type ProxyLookup = (host: string) => Promise<string[]>

/** Why the proxy refused a destination, as a word (the audit log counts refusals per task, host and code). */
export type RefusalCode =
  | 'no_network'
  | 'bad_port'
  | 'not_allowlisted'
  | 'unresolved'
  | 'no_address'
  | 'private_address'
  | 'host_network'

/** Where the proxy may connect for one request, or why not (`status` is the proxy's answer). */
export type Destination =
  | { ok: true; host: string; port: number; address: string }
  | { ok: false; status: 403 | 502; code: RefusalCode; reason: string }

/** The system resolver, every address in its own order. */
export const systemLookup: ProxyLookup = async (host) =>
  (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address)

/**
 * Apply a task's network policy to `host:port` by name, then resolve it once and return
 * the address the proxy must connect to (the one it checked: no second resolution a DNS
 * rebinding could answer differently).
 * - `none`: refused.
 * - `allowlist`: only a listed name (exact, case-insensitive), or an address inside a
 *   listed address or CIDR, on a listed port (any port when the entry lists none); its
 *   addresses must all be public unless `allowPrivate`.
 * - `public`: any name whose addresses are all public (core's private ranges) and on none of
 *   the host's own networks (its interfaces as they are now).
 */
export async function checkDestination(
  egress: ProxyGrant['egress'],
  rawHost: string,
  port: number,
  lookup: ProxyLookup,
  interfaces?: Interfaces,
): Promise<Destination> {
  const host = normalHost(rawHost)
  if (egress.policy === 'none') return refuse('no_network', 'this task has no network access')
  if (!Number.isInteger(port) || port < 1 || port > 65535) return refuse('bad_port', `port ${port} is not a TCP port`)
  if (egress.policy === 'allowlist' && !allowlisted(egress.allow ?? [], host, port)) {
    return refuse('not_allowlisted', `${host}:${port} is not in this task's allowlist`)
  }
  let addresses: string[]
  try {
    addresses = isIP(host) ? [host] : await lookup(host)
  } catch {
    return { ok: false, status: 502, code: 'unresolved', reason: `${host} could not be resolved` }
  }
  if (addresses.length === 0) return { ok: false, status: 502, code: 'no_address', reason: `${host} has no address` }
  const mayBePrivate = egress.policy === 'allowlist' && egress.allowPrivate === true
  const bad = mayBePrivate ? undefined : addresses.find((a) => isPrivateAddress(a))
  if (bad) return refuse('private_address', `${host} resolves to ${bad}, a private, loopback or link-local address`)
  const near = egress.policy === 'public' ? addresses.find((a) => onHostNetwork(a, interfaces)) : undefined
  if (near) return refuse('host_network', `${host} resolves to ${near}, on one of this host's own networks`)
  return { ok: true, host, port, address: addresses[0]! }
}

function refuse(code: RefusalCode, reason: string): Destination {
  return { ok: false, status: 403, code, reason }
}

function allowlisted(allow: NonNullable<ProxyGrant['egress']['allow']>, host: string, port: number): boolean {
  const family = isIP(host)
  return allow.some((entry) => {
    if (entry.ports && entry.ports.length > 0 && !entry.ports.includes(port)) return false
    const [base, bits] = normalHost(entry.host).split('/') as [string, string | undefined]
    const entryFamily = isIP(base)
    if (!entryFamily) return bits === undefined && base === host
    if (family !== entryFamily) return false
    const type = family === 4 ? 'ipv4' : 'ipv6'
    const list = new BlockList()
    list.addSubnet(base, bits === undefined ? (family === 4 ? 32 : 128) : Number(bits), type)
    return list.check(host, type)
  })
}
