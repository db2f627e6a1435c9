/**
 * Allowlist networks do not pile up: every new allowlist makes a network (its hash is the
 * name) and the engines' address pools hold a few dozen, so a network no container uses
 * is removed with its firewall chains once it is older than the grace, and one in use (a
 * container made on it, started or not) is kept with its rules. A server whose network
 * another server swept makes it again at its next container. The dispatch chains end in a
 * catch-all that refuses a Berth bridge without rules of its own. On Docker and Podman,
 * with addresses of 203.0.113.0/24 (TEST-NET-3) in the allowlists: rules are read, never
 * probed.
 */
import { execFileSync } from 'node:child_process'
import { IDLE_COMMAND, MANAGED_LABEL, type EgressPolicy } from '@berth/core'
import { readEngine } from '@berth/testkit'
import Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import type { EngineContext } from '../src/context.js'
import { egressEnforcer, egressNetwork } from '../src/egress.js'
import { toContainerError } from '../src/errors.js'
import { createEngineRuntime } from '../src/engine-runtime.js'
import { catchAllRule, chainNames, removeBridgeRules } from '../src/firewall.js'

const ipt = (...args: string[]) => execFileSync('iptables', ['-w', ...args], { encoding: 'utf8' })
const chains = () => ipt('-S')
/** A policy of its own per test and engine: a port made of the pid and a counter. */
let n = 0
const policy = (): EgressPolicy => ({
  policy: 'allowlist',
  allow: [{ host: '203.0.113.7', ports: [20_000 + ((process.pid * 7 + n++) % 40_000)] }],
})
const GRACE_MS = 1_500
const aged = () => new Promise((r) => setTimeout(r, GRACE_MS + 200))

describe.each(['docker', 'podman'] as const)('allowlist networks on %s', (engine) => {
  const info = readEngine(engine)
  const docker = new Docker({ socketPath: info.socketPath })
  const ctx: EngineContext = {
    name: engine,
    docker,
    endpoint: info.socketPath,
    watchIntervalMs: 1_000,
    error: (err, op) => toContainerError(err, { runtime: engine, op, endpoint: info.socketPath }),
  }
  const made: string[] = []
  const networksMade = new Set<string>()
  const networkOf = (p: EgressPolicy) => {
    const net = egressNetwork(p, engine)!
    networksMade.add(net.name)
    return net
  }
  const exists = async (name: string) =>
    docker
      .getNetwork(name)
      .inspect()
      .then(() => true)
      .catch(() => false)
  /** A container made on the policy's network (not started): what keeps a network in use. */
  const containerOn = async (network: string) => {
    const c = await docker.createContainer({
      Image: info.image,
      Cmd: [...IDLE_COMMAND],
      HostConfig: { NetworkMode: network },
    })
    made.push(c.id)
    return c.id
  }

  afterAll(async () => {
    for (const id of made)
      await docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => {})
    for (const name of networksMade) {
      await docker
        .getNetwork(name)
        .remove()
        .catch(() => {})
      await removeBridgeRules(`brb${name.slice('berth-allow-'.length)}`).catch(() => {})
    }
  })

  it('a network no container uses goes with its chains once older than the grace; one in use stays with its rules', async () => {
    const egress = egressEnforcer(ctx, {}, { sweepGraceMs: GRACE_MS })
    const unused = policy()
    const used = policy()
    const a = networkOf(unused)
    const b = networkOf(used)
    expect(await egress.networkFor(unused)).toBe(a.name)
    egress.joined(a.name)
    expect(await egress.networkFor(used)).toBe(b.name)
    await containerOn(b.name)
    egress.joined(b.name)
    for (const net of [a, b]) expect(chains()).toContain(`-N ${chainNames(net.bridge).forward}`)
    // Younger than the grace: both kept.
    expect(await egress.sweep()).toBe(0)
    expect(await exists(a.name)).toBe(true)

    await aged()
    // A new allowlist sweeps before its network is made.
    const next = policy()
    const c = networkOf(next)
    expect(await egress.networkFor(next)).toBe(c.name)
    egress.joined(c.name)
    expect(await exists(a.name)).toBe(false)
    const after = chains()
    expect(after).not.toContain(chainNames(a.bridge).forward)
    expect(after).not.toContain(chainNames(a.bridge).input)
    expect(after).not.toContain(`-i ${a.bridge} `)
    // In use (created, not started): kept, rules and jumps too.
    expect(await exists(b.name)).toBe(true)
    expect(after).toContain(`-A ${chainNames(b.bridge).forward} -d 203.0.113.7/32`)
    expect(after).toContain(`-A BERTH-FORWARD -i ${b.bridge} -g ${chainNames(b.bridge).forward}`)
    // The catch-all is each dispatch chain's last rule, below every bridge's jump.
    for (const dispatch of ['BERTH-FORWARD', 'BERTH-INPUT']) {
      expect(ipt('-S', dispatch).trim().split('\n').at(-1)).toBe(catchAllRule(dispatch, 4))
    }
  })

  it('a server whose network another server swept makes it again at its next container', async () => {
    const rt = createEngineRuntime({ name: engine, docker, endpoint: info.socketPath })
    const other = egressEnforcer(ctx, {}, { sweepGraceMs: GRACE_MS })
    const p = policy()
    const net = networkOf(p)
    const first = await rt.create({ image: info.image, cmd: [...IDLE_COMMAND], egress: p })
    await rt.remove(first.id)
    await aged()
    expect(await other.sweep()).toBeGreaterThanOrEqual(1)
    expect(await exists(net.name)).toBe(false)
    // rt still knows the network as made: its create finds it gone and makes it again, rules included.
    const second = await rt.create({ image: info.image, cmd: [...IDLE_COMMAND], egress: p })
    made.push(second.id)
    expect(await exists(net.name)).toBe(true)
    expect(chains()).toContain(`-A BERTH-FORWARD -i ${net.bridge} -g ${chainNames(net.bridge).forward}`)
    const labels = ((await docker.getNetwork(net.name).inspect()) as { Labels: Record<string, string> }).Labels
    expect(labels[MANAGED_LABEL]).toBe('true')
    await rt.remove(second.id)
    await rt.close?.()
  })
})
