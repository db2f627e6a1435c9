/**
 * `public` refuses the host's own networks as they are now, not as they were when the
 * container started: a network the host joins while a `public` container runs is refused
 * in that container's bridge chain within the refresh bound, and dropped again once the host
 * leaves it. Shown by reading the rules, never by probing: a bridge of its own (this kernel
 * has no dummy links) with an address in 192.88.99.0/24, outside the private ranges and the
 * ranges other tests use. The `berth-public` chain is shared by
 * every server of the host (another one making a container rewrites it too), so the
 * refresher is also shown alone, on a bridge chain only this test uses.
 */
import { execFileSync } from 'node:child_process'
import { IDLE_COMMAND } from '@berth/core'
import { readEngine } from '@berth/testkit'
import { afterAll, beforeAll, expect, it, vi } from 'vitest'
import { egressNetwork } from '../src/egress.js'
import { hostNetworkRefresher } from '../src/egress-refresh.js'
import { chainNames, hostNetworks, installBridgeRules, removeBridgeRules } from '../src/firewall.js'
import { dockerRuntime } from '../src/index.js'

const engine = readEngine('docker')
// The default refresh (5 s): the waits below allow 15 s.
const rt = dockerRuntime({ socketPath: engine.socketPath })
const run = `egress-refresh-${process.pid}`
const dummy = `berthh${process.pid % 100000}`
const chain = chainNames(egressNetwork({ policy: 'public' }, 'docker')!.bridge).forward
const ipt = (...args: string[]) => execFileSync('iptables', ['-w', ...args], { encoding: 'utf8' })
const rules = (of = chain) => ipt('-S', of)
const ip = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8', stdio: 'pipe' })
const own = `brbr${process.pid.toString(16)}`.slice(0, 15)
const ownChains = chainNames(own)
const join = () => {
  ip('link', 'add', dummy, 'type', 'bridge')
  ip('addr', 'add', '192.88.99.1/24', 'dev', dummy)
  ip('link', 'set', dummy, 'up')
}
let id: string

beforeAll(async () => {
  ;({ id } = await rt.create({
    image: engine.image,
    cmd: [...IDLE_COMMAND],
    egress: { policy: 'public' },
    labels: { 'berth.test.run': run },
  }))
  await rt.start(id)
}, 120_000)
afterAll(async () => {
  try {
    ip('link', 'del', dummy)
  } catch {} // already gone when the test passed
  for (const c of await rt.list({ labels: { 'berth.test.run': run } })) await rt.remove(c.id)
  await rt.close?.()
  await removeBridgeRules(own)
})

it("a network the host joins while a public container runs is refused in its bridge's rules, and dropped when it leaves", async () => {
  expect((await rt.inspect(id)).running).toBe(true)
  expect(rules()).not.toContain('192.88.99.0/24')
  join()
  await vi.waitFor(() => expect(rules()).toContain(`-A ${chain} -d 192.88.99.0/24 -j REJECT`), {
    timeout: 15_000,
    interval: 200,
  })
  // The refusal comes before the chain lets the rest go on to the engine's rules.
  const lines = rules().split('\n')
  expect(lines.findIndex((l) => l.includes('192.88.99.0/24'))).toBeLessThan(
    lines.findIndex((l) => l.endsWith('-j RETURN')),
  )
  ip('link', 'del', dummy)
  await vi.waitFor(() => expect(rules()).not.toContain('192.88.99.0/24'), { timeout: 15_000, interval: 200 })
  expect((await rt.inspect(id)).running).toBe(true)
}, 60_000)

it("the refresher alone rewrites a public bridge's chain when the host's networks change, and only then", async () => {
  await installBridgeRules({ bridge: own, gateway: null, policy: 'public', allow: [], hostNetworks: hostNetworks() })
  const publics = new Map([[own, { gateway: null, refused: JSON.stringify(hostNetworks()) }]])
  const refresher = hostNetworkRefresher(publics, { refreshMs: 200 })
  refresher.start()
  try {
    expect(rules(ownChains.forward)).not.toContain('192.88.99.0/24')
    join()
    await vi.waitFor(() => expect(rules(ownChains.forward)).toContain('-d 192.88.99.0/24 -j REJECT'), {
      timeout: 15_000,
      interval: 100,
    })
    ip('link', 'del', dummy)
    await vi.waitFor(() => expect(rules(ownChains.forward)).not.toContain('192.88.99.0/24'), {
      timeout: 15_000,
      interval: 100,
    })
  } finally {
    refresher.stop()
  }
}, 60_000)
