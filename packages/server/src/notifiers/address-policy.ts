import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { BlockList, isIP, type LookupFunction } from 'node:net'
import { PRIVATE_IPV4_RANGES, PRIVATE_IPV6_RANGES } from '@berth/core'

/**
 * Addresses a webhook must not reach unless the deployment allows it: "this" network,
 * private (RFC 1918, unique-local), loopback, link-local (cloud metadata lives at
 * 169.254.169.254), shared CGNAT, benchmarking, multicast and reserved ranges, and the IPv6
 * forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4), so no spelling of an
 * internal address gets through. The list is core's (`PRIVATE_IPV4_RANGES`), shared with the
 * container firewall.
 */
const blocked4 = new BlockList()
for (const [net, bits] of PRIVATE_IPV4_RANGES) blocked4.addSubnet(net, bits, 'ipv4')
// A separate list: node checks IPv4 addresses against IPv6 rules too (as mapped addresses).
const blocked6 = new BlockList()
for (const [net, bits] of PRIVATE_IPV6_RANGES) blocked6.addSubnet(net, bits, 'ipv6')

/** The 16 bytes of an IPv6 address. */
function ipv6Bytes(address: string): number[] {
  let text = address
  const dotted = text.match(/(\d+\.\d+\.\d+\.\d+)$/)
  if (dotted) {
    const [a, b, c, d] = dotted[1]!.split('.').map(Number) as [number, number, number, number]
    text = `${text.slice(0, -dotted[1]!.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, undefined]
  const left = head ? head.split(':') : []
  const right = tail ? tail.split(':') : []
  const groups = tail === undefined ? left : [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
  return groups.flatMap((g) => {
    const n = parseInt(g, 16)
    return [n >> 8, n & 0xff]
  })
}

/** The IPv4 address an IPv6 one embeds in its last 32 bits (mapped `::ffff:0:0/96`, compatible `::/96`, NAT64 `64:ff9b::/96`), if any. */
function embeddedIpv4(address: string): string | null {
  const b = ipv6Bytes(address)
  const prefix = b.slice(0, 12)
  const zero = (xs: number[]) => xs.every((x) => x === 0)
  const mapped =
    zero(prefix.slice(0, 10)) &&
    ((prefix[10] === 0xff && prefix[11] === 0xff) || (prefix[10] === 0 && prefix[11] === 0))
  const nat64 =
    prefix[0] === 0 && prefix[1] === 0x64 && prefix[2] === 0xff && prefix[3] === 0x9b && zero(prefix.slice(4))
  return mapped || nat64 ? b.slice(12).join('.') : null
}

/**
 * True for an address a webhook may not reach by default.
 *
 * @example
 * ```ts
 * isPrivateAddress('169.254.169.254') // true
 * isPrivateAddress('93.184.216.34') // false
 * ```
 */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address)
  if (family === 4) return blocked4.check(address, 'ipv4')
  if (family === 6) {
    const bare = address.replace(/%.*$/, '')
    const v4 = embeddedIpv4(bare)
    return v4 !== null ? blocked4.check(v4, 'ipv4') || !isIP(v4) : blocked6.check(bare, 'ipv6')
  }
  return true
}

/** A refused destination. `code` tells the notifier not to retry. */
export class BlockedAddressError extends Error {
  readonly code = 'EBLOCKEDADDRESS'
  constructor(host: string, address: string) {
    super(
      `${host} resolves to ${address}, a private, loopback or link-local address, which this server does not send webhooks to`,
    )
    this.name = 'BlockedAddressError'
  }
}

/**
 * The host of a URL as DNS and `isIP` want it.
 *
 * @example
 * ```ts
 * hostOf(new URL('http://[::1]:8080/')) // '::1'
 * ```
 */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1')
}

/** Resolves a host name to all its addresses (the system resolver by default; tests inject their own). */
export type Resolve = (host: string) => Promise<LookupAddress[]>

/**
 * Every address of `host` from the system resolver.
 *
 * @example
 * ```ts
 * await resolveAll('localhost') // [{ address: '127.0.0.1', family: 4 }, ...]
 * ```
 */
export function resolveAll(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) =>
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses))),
  )
}

/**
 * Resolve `host` and refuse it when any of its addresses is private (all are checked: a
 * client may try each). Returns the addresses.
 *
 * @example
 * ```ts
 * await publicAddresses('localhost') // throws BlockedAddressError
 * ```
 */
export async function publicAddresses(host: string, resolve: Resolve = resolveAll): Promise<LookupAddress[]> {
  const addresses = isIP(host) ? [{ address: host, family: isIP(host) }] : await resolve(host)
  const bad = addresses.find((a) => isPrivateAddress(a.address))
  if (bad) throw new BlockedAddressError(host, bad.address)
  return addresses
}

/**
 * A `lookup` for node's HTTP client that resolves and checks in one step, so the
 * connection goes to exactly the addresses that were checked (no second resolution a DNS
 * rebinding could answer differently).
 *
 * @example
 * ```ts
 * http.request(url, { lookup: checkedLookup })
 * ```
 */
export const checkedLookup: LookupFunction = checkedLookupWith(resolveAll)

/**
 * {@link checkedLookup} over a resolver of your own (tests answer from a table).
 *
 * @example
 * ```ts
 * http.request(url, { lookup: checkedLookupWith(async () => [{ address: '203.0.113.5', family: 4 }]) })
 * ```
 */
export function checkedLookupWith(resolve: Resolve): LookupFunction {
  return (host, options, callback) => checked(resolve, host, options, callback)
}

function checked(resolve: Resolve, ...[host, options, callback]: Parameters<LookupFunction>): void {
  publicAddresses(host, resolve).then(
    (addresses) => {
      const wanted =
        options.family === 4 || options.family === 6 ? addresses.filter((a) => a.family === options.family) : addresses
      if (wanted.length === 0) {
        callback(Object.assign(new Error(`${host} has no IPv${options.family} address`), { code: 'ENOTFOUND' }), '', 4)
      } else if (options.all) {
        ;(callback as unknown as (err: null, addresses: LookupAddress[]) => void)(null, wanted)
      } else {
        callback(null, wanted[0]!.address, wanted[0]!.family)
      }
    },
    (err: NodeJS.ErrnoException) => callback(err, '', 4),
  )
}
