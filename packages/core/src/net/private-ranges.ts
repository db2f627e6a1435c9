import { BlockList, isIP } from 'node:net'

/**
 * The address ranges Berth never lets an untrusted party reach by default: "this"
 * network, private (RFC 1918, unique-local), loopback, link-local (cloud metadata lives
 * at 169.254.169.254), shared CGNAT, benchmarking, multicast and reserved ranges, and the
 * IPv6 forms that embed an IPv4 address (NAT64 local-use, 6to4). One list, used by the
 * webhook guard (`@berth/server`) and by the container firewall of the `public` and
 * `allowlist` network policies (`@berth/adapter-docker`).
 */

/** IPv4 ranges as `[network, prefix length]`. */
export const PRIVATE_IPV4_RANGES: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
]

/**
 * IPv6 ranges as `[network, prefix length]`. Mapped (`::ffff:0:0/96`), compatible and
 * NAT64 (`64:ff9b::/96`) addresses are judged by the IPv4 address they embed (the webhook
 * guard) or, on the wire, refused outright (the container firewall, see {@link PRIVATE_IPV6_EMBEDDING}).
 */
export const PRIVATE_IPV6_RANGES: readonly (readonly [string, number])[] = [
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
]

/** IPv6 ranges that carry an IPv4 address (the firewall refuses them whole: `::/96` compatible and loopback, mapped, NAT64). */
export const PRIVATE_IPV6_EMBEDDING: readonly (readonly [string, number])[] = [
  ['::', 96],
  ['::ffff:0.0.0.0', 96],
  ['64:ff9b::', 96],
]

/**
 * Every range as CIDR text, for firewall rules.
 *
 * @example
 * ```ts
 * privateCidrs(4).includes('169.254.0.0/16') // true
 * ```
 */
export function privateCidrs(family: 4 | 6): string[] {
  const ranges = family === 4 ? PRIVATE_IPV4_RANGES : [...PRIVATE_IPV6_EMBEDDING, ...PRIVATE_IPV6_RANGES]
  return ranges.map(([net, bits]) => `${net}/${bits}`)
}

const v4ToInt = (a: string) => a.split('.').reduce((n, o) => n * 256 + Number(o), 0)
const private6 = new BlockList()
for (const [net, bits] of [...PRIVATE_IPV6_EMBEDDING, ...PRIVATE_IPV6_RANGES]) private6.addSubnet(net, bits, 'ipv6')

/**
 * True when an address or CIDR (`10.1.2.3`, `0.0.0.0/0`, `fd00::/8`) reaches into any
 * private range: an allowlist entry that would open what `public` refuses.
 *
 * @example
 * ```ts
 * touchesPrivateRange('169.254.169.254') // true
 * touchesPrivateRange('0.0.0.0/0') // true (it contains them all)
 * touchesPrivateRange('203.0.113.0/24') // false
 * ```
 */
export function touchesPrivateRange(entry: string): boolean {
  const [address, bitsText] = entry.split('/') as [string, string | undefined]
  const family = isIP(address)
  if (family === 4) {
    const bits = bitsText === undefined ? 32 : Number(bitsText)
    const size = 2 ** (32 - bits)
    const start = Math.floor(v4ToInt(address) / size) * size
    const end = start + size - 1
    return PRIVATE_IPV4_RANGES.some(([net, b]) => {
      const s = v4ToInt(net)
      return start <= s + 2 ** (32 - b) - 1 && s <= end
    })
  }
  if (family === 6) {
    const bits = bitsText === undefined ? 128 : Number(bitsText)
    // Wider than the narrowest private prefix could contain one: refused as touching.
    return bits < 16 || private6.check(address, 'ipv6')
  }
  return false
}
