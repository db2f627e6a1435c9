/**
 * Environments on real engines: the network policy is enforced by the engine and the host
 * firewall, the agent runs unprivileged, the offline model works under every policy.
 * Probes go only to listeners this test runs on this machine (its own addresses, and a
 * container it starts); the metadata address and the private ranges are checked by
 * reading the installed rules (`iptables -S`), never by sending traffic there.
 */
import { execFileSync } from 'node:child_process'
import { createServer, type Server, type Socket } from 'node:net'
import { collectExec, DEFAULT_ENVIRONMENT_CAPS, privateCidrs, touchesPrivateRange } from '@berth/core'
import { startOfflineModel } from '@berth/stub-model'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { egressNetwork } from '../../adapter-docker/src/egress.js'
import { removeBridgeRules } from '../../adapter-docker/src/firewall.js'
import { engineRuntime, ENGINES, sweep, uniquePoolName } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'
import { hostAddress } from './net.helpers.js'

/** `docker`/`podman` CLI (only to read what the engine holds: a network's gateway, a container's address). */
const cli = (engine: string, args: string[]) => execFileSync(engine, args, { encoding: 'utf8' }).trim()

/** A bash line that prints `open T` or `closed T` for each `ip:port`, each try bounded to 3 s, then the uid. */
function probeCommand(targets: string[]): string {
  return `for t in ${targets.join(' ')}; do if timeout 3 bash -c "echo > /dev/tcp/\${t%:*}/\${t##*:}" 2>/dev/null; then echo "open $t"; else echo "closed $t"; fi; done; echo "uid=$(id -u)"; echo "ifaces=$(ls /sys/class/net | tr '\\n' ' ')"`
}

describe.each(ENGINES)('environments on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let listener: Server
  const sockets = new Set<Socket>()
  let port: number
  let peerId: string
  let peerIp: string
  let bridgeGateway: string
  const host = hostAddress()
  const { info, runtime } = engineRuntime(engine)
  const peerPool = uniquePoolName(`env-peer-${engine}`)

  beforeAll(async () => {
    listener = createServer((s) => {
      sockets.add(s.on('close', () => sockets.delete(s)))
      // The probe writes a newline and closes at once; our 'pong' may then meet a reset,
      // which is the peer's doing, not a failure of the test (an unhandled 'error' would be).
      s.on('error', () => {})
      s.end('pong')
    })
    await new Promise<void>((r) => listener.listen(0, '0.0.0.0', r))
    port = (listener.address() as { port: number }).port
    // A listener in another container, on the engine's default network.
    const peer = await runtime.create({
      image: info.image,
      cmd: ['node', '-e', `require('net').createServer((s) => s.end('pong')).listen(${port})`],
      network: 'bridge',
      labels: { 'berth.pool': peerPool },
    })
    peerId = peer.id
    await runtime.start(peerId)
    peerIp = cli(engine, ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', peerId])
    // The default environment (a new profile names none) gets the operator's default: public.
    t = await taskServer(engine, {
      min: 0,
      max: 4,
      berth: {
        pool: { image: info.image, min: 0, max: 4, name: uniquePoolName(`env-${engine}`) },
        // Allowlisting this host's own address needs the operator's leave when it is a private one.
        environments: { caps: { ...DEFAULT_ENVIRONMENT_CAPS, allowPrivateDestinations: touchesPrivateRange(host) } },
        // A model credential may name the fake provider on loopback.
        allowPrivateWebhooks: true,
      },
    })
  }, 120_000)

  afterAll(async () => {
    for (const s of sockets) s.destroy()
    await new Promise((r) => listener.close(r))
    await sweep(runtime, peerPool)
    await t?.s.close()
    // The allowlist's network is this run's own (its hash covers the port); berth-public is shared.
    const own = egressNetwork(
      {
        policy: 'allowlist',
        allow: [{ host, ports: [port] }],
        ...(touchesPrivateRange(host) && { allowPrivate: true }),
      },
      engine,
    )
    // Gone already when another server's sweep took it meanwhile (unused between tasks); its chains go too.
    if (own) {
      try {
        execFileSync(engine, ['network', 'rm', own.name], { stdio: 'ignore' })
      } catch {}
      await removeBridgeRules(own.bridge)
    }
  }, 240_000)

  /** Run a probe task in `profileId`'s environment; the tool's output. */
  async function probe(profileId: string, targets: string[]) {
    const command = probeCommand(targets)
    const task = await t.run({
      profile_id: profileId,
      prompt: `Probe. [[berth:tool Bash ${JSON.stringify({ command })}]] [[berth:text probed]]`,
    })
    const events = await t.events(task.task_id)
    const result = events.find((e) => e.type === 'tool_result')
    return { task, output: String(result?.output ?? '') }
  }

  async function profileIn(environment: { id: string }, slug: string): Promise<string> {
    const p = await t.api.profiles.create({
      body: { name: slug, slug, api_key_id: t.keyId, default_tools: ['Bash'], environment_id: environment.id },
    })
    return p.id
  }

  it('public (the default): the host (bridge gateway, its other address) and another container are unreachable; the agent is not root', async () => {
    const { task, output } = await probe(t.profileId, [
      `${host}:${port}`,
      `${peerIp}:${port}`,
      `${engine === 'docker' ? '172.17.0.1' : host}:${port}`,
    ])
    bridgeGateway = cli(engine, [
      'network',
      'inspect',
      '-f',
      engine === 'docker' ? '{{range .IPAM.Config}}{{.Gateway}}{{end}}' : '{{range .Subnets}}{{.Gateway}}{{end}}',
      'berth-public',
    ])
    expect(bridgeGateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/)
    expect(task.status, JSON.stringify(task)).toBe('completed')
    expect(task.result?.text).toContain('probed')
    expect(output).toContain(`closed ${host}:${port}`)
    expect(output).toContain(`closed ${peerIp}:${port}`)
    expect(output).not.toContain('open ')
    expect(output).toMatch(/uid=(\d+)/)
    expect(output).not.toContain('uid=0\n')
    expect(output).toContain('uid=1000')
    // The gateway of the Berth network itself (the host, seen from the container).
    const again = await probe(t.profileId, [`${bridgeGateway}:${port}`])
    expect(again.output).toContain(`closed ${bridgeGateway}:${port}`)
  }, 120_000)

  it('the installed rules refuse every private range, the metadata address included, IPv4 and IPv6, and the host itself', () => {
    const v4 = execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' })
    const v6 = execFileSync('ip6tables', ['-w', '-S'], { encoding: 'utf8' })
    const bridge = cli(engine, [
      'network',
      'inspect',
      '-f',
      engine === 'docker' ? '{{index .Options "com.docker.network.bridge.name"}}' : '{{.NetworkInterface}}',
      'berth-public',
    ])
    const fwd = v4
      .split('\n')
      .find((l) => l.startsWith(`-A BERTH-FORWARD -i ${bridge} -g `))!
      .split(' -g ')[1]!
    const inp = v4
      .split('\n')
      .find((l) => l.startsWith(`-A BERTH-INPUT -i ${bridge} -g `))!
      .split(' -g ')[1]!
    for (const cidr of privateCidrs(4)) expect(v4).toContain(`-A ${fwd} -d ${cidr} -j REJECT`)
    expect(privateCidrs(4)).toContain('169.254.0.0/16') // 169.254.169.254, the metadata address
    for (const cidr of privateCidrs(6)) expect(v6).toContain(`-A ${fwd} -d ${cidr} -j REJECT`)
    // Everything to the host itself is refused (only its DNS forwarder on the gateway passes).
    expect(
      v4
        .split('\n')
        .filter((l) => l.startsWith(`-A ${inp} `))
        .at(-1),
    ).toMatch(/-j REJECT/)
    expect(
      v6
        .split('\n')
        .filter((l) => l.startsWith(`-A ${fwd} `))
        .at(-1),
    ).toMatch(/-j REJECT/)
    // Hooked first, before the engine's own rules.
    expect(
      execFileSync('iptables', ['-w', '-S', 'FORWARD'], { encoding: 'utf8' })
        .split('\n')
        .find((l) => l.startsWith('-A ')),
    ).toBe('-A FORWARD -j BERTH-FORWARD')
    expect(
      execFileSync('iptables', ['-w', '-S', 'INPUT'], { encoding: 'utf8' })
        .split('\n')
        .find((l) => l.startsWith('-A ')),
    ).toBe('-A INPUT -j BERTH-INPUT')
  })

  it('allowlist: the allowlisted listener is reachable, nothing else; the offline model works', async () => {
    const env = await t.api.environments.create({
      body: { name: 'allow-one', network: { policy: 'allowlist', allow: [{ host, ports: [port] }] } },
    })
    const { task, output } = await probe(await profileIn(env, `allow-${engine}`), [
      `${host}:${port}`,
      `${peerIp}:${port}`,
      `${bridgeGateway ?? host}:${port}`,
    ])
    expect(task.status, JSON.stringify(task)).toBe('completed')
    expect(output).toContain(`open ${host}:${port}`)
    expect(output).toContain(`closed ${peerIp}:${port}`)
    if (bridgeGateway) expect(output).not.toContain(`open ${bridgeGateway}:${port}`)
    expect(output).toContain('uid=1000')
  }, 120_000)

  it('none: no interface but loopback, nothing reachable; the offline model works', async () => {
    const env = await t.api.environments.create({
      body: { name: 'offline', network: { policy: 'none' }, env: { GREETING: 'hi' } },
    })
    const { task, output } = await probe(await profileIn(env, `none-${engine}`), [
      `${host}:${port}`,
      `${peerIp}:${port}`,
    ])
    expect(task.status, JSON.stringify(task)).toBe('completed')
    expect(output).toContain(`closed ${host}:${port}`)
    expect(output).toContain(`closed ${peerIp}:${port}`)
    expect(output.trim()).toMatch(/ifaces=lo$/)
  }, 120_000)

  it('a real-provider credential works under every policy: the model is reached through the broker, not the network', async () => {
    const KEY = 'sk-ant-api03-POLICIES-5t6y7u8i9o'
    const upstream = await startOfflineModel({ apiKey: KEY })
    try {
      const key = await t.api.apiKeys.create({
        body: { name: 'provider', provider: 'anthropic', key: KEY, base_url: upstream.url },
      })
      const allow = await t.api.environments.create({
        body: { name: 'gw-allow', network: { policy: 'allowlist', allow: [{ host, ports: [port] }] } },
      })
      const none = await t.api.environments.create({ body: { name: 'gw-none', network: { policy: 'none' } } })
      for (const [slug, environment_id] of [
        ['gw-public', null],
        ['gw-allowlist', allow.id],
        ['gw-none', none.id],
      ] as const) {
        const profile = await t.api.profiles.create({
          body: { name: slug, slug: `${slug}-${engine}`, api_key_id: key.id, default_tools: ['Bash'], environment_id },
        })
        const before = upstream.requests.length
        const task = await t.run({
          profile_id: profile.id,
          prompt: `Hello. [[berth:tool Bash {"command":"true"}]] [[berth:text answered under ${slug}]]`,
        })
        expect(task.status, JSON.stringify(task)).toBe('completed')
        expect(task.result?.text).toContain(`answered under ${slug}`)
        expect(upstream.requests.length).toBeGreaterThan(before)
      }
    } finally {
      await upstream.close()
    }
  }, 240_000)

  it('the conformance check: a command in a container made for the agent user runs as that user, with no capabilities', async () => {
    const { id } = await runtime.create({
      image: info.image,
      cmd: ['sleep', 'infinity'],
      user: '1000:1000',
      workingDir: '/workspace',
      labels: { 'berth.pool': peerPool },
    })
    await runtime.start(id)
    const r = await collectExec(
      await runtime.exec(id, {
        cmd: ['sh', '-c', 'id -u; grep CapEff /proc/self/status; touch /workspace/x && echo writable'],
      }),
    )
    expect(r.stdout).toMatch(/^1000\n/)
    expect(r.stdout).toMatch(/CapEff:\s+0+\n/)
    expect(r.stdout).toContain('writable')
    await runtime.remove(id)
  }, 60_000)
})
