/**
 * `public` egress through the broker's proxy (the local runtime's only way out) refuses the
 * host's own networks as well as the private ranges, as the engines' firewall does, read
 * from the interfaces at each request: a network the host joins is refused from then on.
 */
import { type NetworkInterfaceInfo, networkInterfaces } from 'node:os'
import { describe, expect, it } from 'vitest'
import { onHostNetwork } from '../src/broker/host-networks.js'
import { checkDestination } from '../src/broker/proxy-policy.js'

const iface = (cidr: string, internal = false): NetworkInterfaceInfo => {
  const [address] = cidr.split('/') as [string]
  const v6 = address.includes(':')
  return v6
    ? { address, netmask: '', family: 'IPv6', mac: '', internal, cidr, scopeid: 0 }
    : { address, netmask: '', family: 'IPv4', mac: '', internal, cidr }
}
const lookup = async (host: string) =>
  ({ 'lan.example.com': ['192.0.2.40'], 'far.example.com': ['203.0.113.9'] })[host] ?? []

describe("public egress and the host's own networks", () => {
  it('refuses an address on a network the host is connected to, by address and by name, and only under public', async () => {
    let interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = { lo: [iface('127.0.0.1/8', true)] }
    const now = () => interfaces
    expect(await checkDestination({ policy: 'public' }, '192.0.2.40', 443, lookup, now)).toMatchObject({ ok: true })
    // The host joins 192.0.2.0/24: the next request sees it.
    interfaces = { ...interfaces, eth1: [iface('192.0.2.2/24'), iface('2001:db8:5::2/64')] }
    for (const host of ['192.0.2.40', 'lan.example.com', '[2001:db8:5::77]'])
      expect(await checkDestination({ policy: 'public' }, host, 443, lookup, now), host).toMatchObject({
        ok: false,
        status: 403,
        reason: expect.stringContaining("this host's own networks"),
      })
    expect(await checkDestination({ policy: 'public' }, 'far.example.com', 443, lookup, now)).toMatchObject({
      ok: true,
      address: '203.0.113.9',
    })
    // An allowlist that names an address there is the operator's choice.
    const allow = { policy: 'allowlist' as const, allow: [{ host: '192.0.2.40' }] }
    expect(await checkDestination(allow, '192.0.2.40', 443, lookup, now)).toMatchObject({ ok: true })
  })

  it("reads this machine's real interfaces by default", () => {
    const own = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && !i.internal && i.family === 'IPv4')
    expect(own, 'this machine has a non-loopback IPv4 interface').toBeDefined()
    expect(onHostNetwork(own!.address)).toBe(true)
    expect(onHostNetwork('127.0.0.1')).toBe(false) // loopback is internal: the private ranges refuse it
    expect(onHostNetwork('not an address')).toBe(false)
  })
})
