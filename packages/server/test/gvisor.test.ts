/**
 * Tasks under gVisor through the server, on both engines (stub model, real containers):
 * with the operator's `isolation: gvisor` every task's container, the default environment's
 * warm ones included, meets gVisor's kernel; an environment asking `container` is a 400;
 * and the egress policy still holds under runsc (it uses the network namespace the engine
 * made): the host's address and a loopback listener of the host are out of reach; under
 * `none` the task still completes (on Podman in a namespace of Berth's with loopback up).
 */
import { execFileSync } from 'node:child_process'
import { createServer, type Server } from 'node:net'
import { release } from 'node:os'
import { DEFAULT_ENVIRONMENT_CAPS, privateCidrs } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { egressNetwork } from '../../adapter-docker/src/egress.js'
import { ENGINES, engineRuntime, uniquePoolName } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'
import { hostAddress } from './net.helpers.js'

const SCRIPT = (targets: string[]) =>
  `uname -r; dmesg | head -n 2; for t in ${targets.join(' ')}; do if timeout 3 bash -c "echo > /dev/tcp/\${t%:*}/\${t##*:}" 2>/dev/null; then echo "open $t"; else echo "closed $t"; fi; done`

describe.each(ENGINES)('gVisor on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  const listeners: Server[] = []
  const ports: Record<'any' | 'loopback', number> = { any: 0, loopback: 0 }
  const host = hostAddress()

  beforeAll(async () => {
    for (const [k, addr] of [
      ['any', '0.0.0.0'],
      ['loopback', '127.0.0.1'],
    ] as const) {
      const l = createServer((s) => s.on('error', () => {}).end('pong'))
      await new Promise<void>((r) => l.listen(0, addr, r))
      listeners.push(l)
      ports[k] = (l.address() as { port: number }).port
    }
    t = await taskServer(engine, {
      min: 1,
      max: 3,
      berth: {
        environments: { caps: { ...DEFAULT_ENVIRONMENT_CAPS, isolation: 'gvisor' } },
        // The default environment's own policy (public), not the helper's `none` (tested below).
        pool: { image: engineRuntime(engine).info.image, min: 1, max: 3, name: uniquePoolName(`gvisor-${engine}`) },
      },
    })
  }, 180_000)

  afterAll(async () => {
    for (const l of listeners) await new Promise((r) => l.close(r))
    await t?.s.close()
  }, 120_000)

  async function run(profileId: string, targets: string[]) {
    const command = SCRIPT(targets)
    const task = await t.run({
      profile_id: profileId,
      prompt: `Probe. [[berth:tool Bash ${JSON.stringify({ command })}]] [[berth:text probed]]`,
    })
    const events = await t.events(task.task_id)
    return { task, output: String(events.find((e) => e.type === 'tool_result')?.output ?? '') }
  }

  it("the default environment's task runs in gVisor's kernel, not the host's", async () => {
    const { task, output } = await run(t.profileId, [])
    expect(task.status, JSON.stringify(task)).toBe('completed')
    expect(output.split('\n')[0]).not.toBe(release())
    expect(output).toMatch(/gVisor/)
  }, 120_000)

  it('environments show gvisor; asking for container is a 400 at isolation', async () => {
    const res = await t.s.request('/v1/environments', {
      method: 'POST',
      token: t.token,
      json: { name: 'weak', isolation: 'container' },
    })
    expect(res.status).toBe(400)
    const body = (await res.json()) as { details: { issues: { path: string }[] } }
    expect(body.details.issues.map((i) => i.path)).toContain('isolation')
    const bad = await t.s.request('/v1/environments', {
      method: 'POST',
      token: t.token,
      json: { name: 'odd', isolation: 'vm' },
    })
    expect(bad.status).toBe(400)
  })

  it('under public egress the host and its loopback listener stay out of reach; the rules are in place', async () => {
    const env = await t.api.environments.create({ body: { name: 'gv-public', network: { policy: 'public' } } })
    expect(env.isolation).toBe('gvisor')
    const profile = await t.api.profiles.create({
      body: { name: 'gv', slug: 'gv', api_key_id: t.keyId, default_tools: ['Bash'], environment_id: env.id },
    })
    const { task, output } = await run(profile.id, [`${host}:${ports.any}`, `127.0.0.1:${ports.loopback}`])
    expect(task.status, JSON.stringify(task)).toBe('completed')
    expect(output).toMatch(/gVisor/)
    expect(output).toContain(`closed ${host}:${ports.any}`)
    expect(output).toContain(`closed 127.0.0.1:${ports.loopback}`)
    expect(output).not.toContain('open ')
    // The container sat on Berth's public bridge, whose chains refuse the private ranges and the host.
    const bridge = egressNetwork({ policy: 'public' }, engine)!.bridge
    const text = execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' })
    const v4 = text.split('\n')
    const chain = (hook: string) =>
      v4.find((l) => l.startsWith(`-A ${hook} -i ${bridge} -g `))?.split(' -g ')[1] ?? `(no ${hook} rule)`
    for (const cidr of privateCidrs(4)) expect(text).toContain(`-A ${chain('BERTH-FORWARD')} -d ${cidr} -j REJECT`)
    expect(v4.filter((l) => l.startsWith(`-A ${chain('BERTH-INPUT')} `)).at(-1)).toMatch(/-j REJECT/)
  }, 180_000)

  it('under none the task completes (loopback is up for the runner) and nothing outside is reachable', async () => {
    const env = await t.api.environments.create({ body: { name: 'gv-none', network: { policy: 'none' } } })
    const profile = await t.api.profiles.create({
      body: { name: 'gvn', slug: 'gvn', api_key_id: t.keyId, default_tools: ['Bash'], environment_id: env.id },
    })
    const { task, output } = await run(profile.id, [`${host}:${ports.any}`, `127.0.0.1:${ports.loopback}`])
    expect(task.status, JSON.stringify(task)).toBe('completed')
    expect(output).toMatch(/gVisor/)
    expect(output).toContain(`closed ${host}:${ports.any}`)
    expect(output).toContain(`closed 127.0.0.1:${ports.loopback}`)
  }, 180_000)
})
