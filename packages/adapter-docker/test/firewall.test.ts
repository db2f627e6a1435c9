/**
 * The egress firewall's bookkeeping, against the real iptables through a logging wrapper:
 * every container start checks the rules, so a check that finds them in place must cost
 * one read of the table per family and change nothing; one that finds them disturbed puts
 * them back. A bridge name of its own keeps this away from real Berth networks.
 */
import { execFileSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  bridgeRules,
  catchAllRule,
  chainNames,
  ensureDispatchFirst,
  hostNetworks,
  installBridgeRules,
  removeBridgeRules,
  restoreBridgeRules,
  type BridgeRules,
} from '../src/firewall.js'

const dir = mkdtempSync(join(tmpdir(), 'berth-firewall-'))
const log = join(dir, 'calls.log')
/** `iptables`/`ip6tables` with each call's arguments appended to the log. */
const wrapper = (bin: string) => {
  const path = join(dir, bin)
  writeFileSync(path, `#!/bin/sh\necho "${bin} $*" >> ${log}\nexec ${bin} "$@"\n`)
  chmodSync(path, 0o755)
  return path
}
const firewall = { iptables: wrapper('iptables'), ip6tables: wrapper('ip6tables') }
wrapper('iptables-restore')
wrapper('ip6tables-restore')
const calls = () => readFileSync(log, 'utf8').trim().split('\n').filter(Boolean)
const bridge = `brbt${process.pid.toString(16)}`.slice(0, 15)
const rules: BridgeRules = { bridge, gateway: '10.231.0.1', policy: 'public', allow: [] }
const names = chainNames(bridge)
const ipt = (bin: string, args: string[]) => execFileSync(bin, ['-w', ...args], { encoding: 'utf8' })

afterAll(async () => {
  await removeBridgeRules(bridge).catch(() => ({}))
  rmSync(dir, { recursive: true, force: true })
})

describe('egress firewall rules', () => {
  it("installs a bridge's chains, then re-checks them with one table read per family", async () => {
    await installBridgeRules(rules, firewall)
    expect(ipt('iptables', ['-S', names.forward])).toContain(`-A ${names.forward} -d 10.0.0.0/8 -j REJECT`)
    expect(ipt('ip6tables', ['-S', 'BERTH-FORWARD'])).toContain(`-A BERTH-FORWARD -i ${bridge} -g ${names.forward}`)
    // Towards the host: replies to the host's own connections (a preview's proxy) pass, then the DNS forwarder, then nothing.
    expect(
      ipt('iptables', ['-S', names.input])
        .split('\n')
        .filter((l) => l.startsWith('-A ')),
    ).toEqual([
      `-A ${names.input} -m conntrack --ctstate ESTABLISHED -j RETURN`,
      `-A ${names.input} -d 10.231.0.1/32 -p udp -m udp --dport 53 -j RETURN`,
      `-A ${names.input} -d 10.231.0.1/32 -p tcp -m tcp --dport 53 -j RETURN`,
      `-A ${names.input} -j REJECT --reject-with icmp-port-unreachable`,
    ])

    writeFileSync(log, '')
    await installBridgeRules(rules, firewall)
    expect(calls()).toEqual(['iptables -w -S', 'ip6tables -w -S'])
    writeFileSync(log, '')
    await ensureDispatchFirst(firewall)
    expect(calls()).toEqual(['iptables -w -S', 'ip6tables -w -S'])
  })

  it('puts back a rule removed from a bridge chain and the dispatch jump pushed down', async () => {
    ipt('iptables', ['-D', names.forward, '1'])
    ipt('iptables', ['-I', 'FORWARD', '1', '-j', 'RETURN', '-m', 'comment', '--comment', 'berth-test'])
    try {
      await installBridgeRules(rules, firewall)
      expect(
        ipt('iptables', ['-S', names.forward])
          .split('\n')
          .filter((l) => l.startsWith('-A ')),
      ).toEqual(bridgeRules(rules, 4).forward)
      expect(
        ipt('iptables', ['-S', 'FORWARD'])
          .split('\n')
          .find((l) => l.startsWith('-A ')),
      ).toBe('-A FORWARD -j BERTH-FORWARD')
    } finally {
      ipt('iptables', ['-D', 'FORWARD', '-j', 'RETURN', '-m', 'comment', '--comment', 'berth-test'])
    }
  })

  it('keeps the catch-all last in each dispatch chain, below every bridge jump, moving it when a jump lands below it', async () => {
    const dispatchRules = (bin: string, chain: string) =>
      ipt(bin, ['-S', chain])
        .split('\n')
        .filter((l) => l.startsWith('-A '))
    await installBridgeRules(rules, firewall)
    for (const [bin, family] of [
      ['iptables', 4],
      ['ip6tables', 6],
    ] as const)
      for (const chain of ['BERTH-FORWARD', 'BERTH-INPUT']) {
        expect(dispatchRules(bin, chain).at(-1)).toBe(catchAllRule(chain, family))
        expect(dispatchRules(bin, chain).filter((l) => l === catchAllRule(chain, family))).toHaveLength(1)
      }
    // An older server appends its jump (not a goto) at the end, below the catch-all: the next
    // install replaces it and puts the catch-all back last.
    const legacy = `-A BERTH-FORWARD -i ${bridge} -j ${names.forward}`
    ipt('iptables', legacy.split(' '))
    await installBridgeRules(rules, firewall)
    const after = dispatchRules('iptables', 'BERTH-FORWARD')
    expect(after).not.toContain(legacy)
    expect(after).toContain(`-A BERTH-FORWARD -i ${bridge} -g ${names.forward}`)
    expect(after.at(-1)).toBe(catchAllRule('BERTH-FORWARD', 4))
    expect(after.filter((l) => l === catchAllRule('BERTH-FORWARD', 4))).toHaveLength(1)
  })

  it("removes a bridge's chains and jumps in one transaction per family, and puts them back as they were", async () => {
    await installBridgeRules(rules, firewall)
    const before = ['iptables', 'ip6tables'].map((bin) =>
      ipt(bin, ['-S'])
        .split('\n')
        .filter((l) => l.includes(bridge) || l.includes(names.forward) || l.includes(names.input)),
    )
    writeFileSync(log, '')
    const saved = await removeBridgeRules(bridge, firewall)
    // One read and one restore per family.
    expect(calls()).toEqual([
      'iptables -w -S',
      'iptables-restore -w --noflush',
      'ip6tables -w -S',
      'ip6tables-restore -w --noflush',
    ])
    for (const bin of ['iptables', 'ip6tables']) {
      const table = ipt(bin, ['-S'])
      expect(table).not.toContain(names.forward)
      expect(table).not.toContain(names.input)
      expect(table).not.toContain(`-i ${bridge} `)
    }
    // Nothing left: a second removal changes nothing.
    writeFileSync(log, '')
    expect(await removeBridgeRules(bridge, firewall)).toEqual({})
    expect(calls()).toEqual(['iptables -w -S', 'ip6tables -w -S'])
    await restoreBridgeRules(bridge, saved, firewall)
    const back = ['iptables', 'ip6tables'].map((bin) =>
      ipt(bin, ['-S'])
        .split('\n')
        .filter((l) => l.includes(bridge) || l.includes(names.forward) || l.includes(names.input)),
    )
    expect(back.map((x) => [...x].sort())).toEqual(before.map((x) => [...x].sort()))
  })

  it("refuses the host's own networks under `public`: a network the host joins is in the next rules", async () => {
    // A veth pair this test makes (no dummy module everywhere), up, on TEST-NET-2, which no private range covers.
    const link = `bt${process.pid.toString(16)}`.slice(0, 15)
    execFileSync('ip', ['link', 'add', link, 'type', 'veth', 'peer', 'name', `${link}p`])
    try {
      execFileSync('ip', ['addr', 'add', '198.51.100.7/24', 'dev', link])
      for (const l of [link, `${link}p`]) execFileSync('ip', ['link', 'set', l, 'up'])
      const nets = hostNetworks()
      expect(nets).toContainEqual({ cidr: '198.51.100.0/24', family: 4 })
      // Private ones are covered by the ranges already: never listed twice.
      expect(nets.some((n) => n.cidr.startsWith('10.') || n.cidr.startsWith('172.') || n.cidr.startsWith('127.'))).toBe(
        false,
      )
      await installBridgeRules({ ...rules, hostNetworks: nets }, firewall)
      expect(ipt('iptables', ['-S', names.forward])).toContain(`-A ${names.forward} -d 198.51.100.0/24 -j REJECT`)
      // Checked again with nothing changed: one read per family, no write.
      writeFileSync(log, '')
      await installBridgeRules({ ...rules, hostNetworks: hostNetworks() }, firewall)
      expect(calls()).toEqual(['iptables -w -S', 'ip6tables -w -S'])
    } finally {
      execFileSync('ip', ['link', 'del', link])
    }
    // Gone from the host: gone from the rules at the next check.
    await installBridgeRules({ ...rules, hostNetworks: hostNetworks() }, firewall)
    expect(ipt('iptables', ['-S', names.forward])).not.toContain('198.51.100.0/24')
  })

  it('computes network addresses from interface addresses', () => {
    const iface = (cidr: string, internal = false) => ({
      address: cidr.split('/')[0]!,
      netmask: '',
      family: 'IPv4' as const,
      cidr,
      internal,
      mac: '',
    })
    expect(
      hostNetworks({
        eth0: [iface('192.0.2.2/24')],
        eth1: [iface('203.0.113.77/28'), iface('10.1.2.3/24')],
        lo: [iface('127.0.0.1/8', true)],
        docker0: [iface('172.17.0.1/16')],
      }),
    ).toEqual([
      { cidr: '192.0.2.0/24', family: 4 },
      { cidr: '203.0.113.64/28', family: 4 },
    ])
  })

  it('syncs one chain from several servers at once, its rules changing, without an error or a partial chain', async () => {
    const variants = [
      { ...rules, hostNetworks: [{ cidr: '198.51.100.0/24', family: 4 as const }] },
      { ...rules, hostNetworks: [{ cidr: '203.0.113.0/24', family: 4 as const }] },
      rules,
    ]
    // As instances on one host do after a change: each reads, then writes its view.
    await Promise.all(Array.from({ length: 9 }, (_, i) => installBridgeRules(variants[i % 3]!, firewall)))
    const chain = () =>
      ipt('iptables', ['-S', names.forward])
        .split('\n')
        .filter((l) => l.startsWith('-A '))
    // Whole: exactly one of the variants' rule sets, never a mix or a half.
    expect(variants.map((v) => bridgeRules(v, 4).forward)).toContainEqual(chain())
    await installBridgeRules(rules, firewall)
    expect(chain()).toEqual(bridgeRules(rules, 4).forward)
  })
})
