import { BlockList, isIP } from 'node:net'
import { type NetworkInterfaceInfo, networkInterfaces } from 'node:os'

/** The host's interfaces, as `os.networkInterfaces()` lists them (tests pass their own). */
export type Interfaces = () => NodeJS.Dict<NetworkInterfaceInfo[]>

/**
 * Whether an address lies in a network this host is connected to (its LAN, an engine's
 * bridge, a VPN), read from the interfaces at each call, so a network joined a moment ago
 * counts. `public` egress refuses these as well as the private ranges: a task may reach
 * the internet, not the machines beside its host. Loopback is left to the private ranges.
 *
 * @example
 * ```ts
 * onHostNetwork('192.0.2.9') // true on a host with an interface 192.0.2.2/24
 * ```
 */
export function onHostNetwork(address: string, interfaces: Interfaces = networkInterfaces): boolean {
  const family = isIP(address)
  if (!family) return false
  const list = new BlockList()
  for (const entries of Object.values(interfaces()))
    for (const i of entries ?? []) {
      if (i.internal || !i.cidr) continue
      const [net, bits] = i.cidr.split('/') as [string, string]
      const type = i.family === 'IPv4' ? 'ipv4' : 'ipv6'
      // A link-local IPv6 address is scoped to its link (fe80::1%eth0); the private ranges refuse those.
      if (isIP(net)) list.addSubnet(net, Number(bits), type)
    }
  return list.check(address, family === 4 ? 'ipv4' : 'ipv6')
}
