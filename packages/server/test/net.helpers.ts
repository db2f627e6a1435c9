/** This machine's addresses, for tests whose listeners a container must reach through the host (never its own loopback). */
import { networkInterfaces } from 'node:os'

/**
 * An IPv4 address of this machine on a real interface (not loopback, not an engine's
 * bridge): a container's loopback is its own, and the engines' bridges come and go.
 *
 * @example
 * ```ts
 * server.listen(0, hostAddress())
 * ```
 */
export function hostAddress(): string {
  for (const [name, addrs] of Object.entries(networkInterfaces())) {
    if (/^(docker|br|brb|podman|cni|veth|lo)/.test(name)) continue
    const a = addrs?.find((x) => x.family === 'IPv4' && !x.internal)
    if (a) return a.address
  }
  throw new Error('this machine has no IPv4 address on a real interface')
}
