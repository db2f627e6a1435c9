/**
 * `prune` (the standalone server's subcommand) on Docker, Podman and `local`: two
 * deployments share a runtime; deployment A has a running container with its workspace
 * disk, a sized volume, an allowlist network with its firewall chains (engines), a running
 * bubblewrap sandbox with its mounts (`local`), and a disk a killed server left; B has a
 * container and a volume, and shares one allowlist network with A. `--dry-run` lists A's and
 * removes nothing; `prune` removes all of A and nothing of B; a running server of A refuses it,
 * and so does A's instance alive on its Redis.
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { dockerRuntime } from '@berth/adapter-docker'
import { localRuntime } from '@berth/adapter-local'
import { podmanRuntime } from '@berth/adapter-podman'
import { IDLE_COMMAND, releaseDisk, workspaceDisks, type ContainerRuntime, type EgressPolicy } from '@berth/core'
import { readEngine, startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { egressNetwork } from '../../adapter-docker/src/egress.js'
import { chainNames } from '../../adapter-docker/src/firewall.js'
import { berthFromConfig } from '../src/embedded/from-config.js'
import { pruneCommand } from '../src/embedded/prune-command.js'
import { SERVER_LEASE_FILE } from '../src/embedded/server-lease.js'
import { configFromEnv } from '../src/config.js'
import { createCoordination } from '../src/coordination/index.js'
import { uniquePoolName } from './pool.helpers.js'

const RUNTIMES = ['docker', 'podman', 'local'] as const
type Name = (typeof RUNTIMES)[number]

/** The settings `prune` reads for a deployment on `name` (the environment only: `cwd` has no settings files). */
function settings(name: Name, dataDir: string, pool: string): Record<string, string> {
  const env: Record<string, string> = { BERTH_DATA_DIR: dataDir, BERTH_POOL_NAME: pool, BERTH_RUNTIME: name }
  if (name === 'docker') env.DOCKER_HOST = `unix://${readEngine('docker').socketPath}`
  if (name === 'podman') env.CONTAINER_HOST = `unix://${readEngine('podman').socketPath}`
  return env
}

async function prune(env: Record<string, string>, args: string[] = []) {
  const lines: string[] = []
  const cwd = mkdtempSync(join(tmpdir(), 'berth-prune-cwd-'))
  const code = await pruneCommand(args, cwd, {
    env: { PATH: process.env.PATH, ...env },
    log: (l) => lines.push(l),
    error: (l) => lines.push(l),
  })
  rmSync(cwd, { recursive: true, force: true })
  return { code, output: lines.join('\n') }
}

/** The runtime a deployment's server would use, with its disk directory. */
function runtimeFor(name: Name, dataDir: string): ContainerRuntime {
  const disks = { dir: join(dataDir, 'disks') }
  if (name === 'local') return localRuntime({ baseDir: join(dataDir, 'containers'), sandbox: 'bwrap', disks })
  const { socketPath } = readEngine(name)
  return name === 'docker' ? dockerRuntime({ socketPath, disks }) : podmanRuntime({ socketPath, disks })
}

const mountsUnder = (dir: string) =>
  readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter((l) => l.includes(dir))
const chainsOf = (network: string) => {
  const { forward, input } = chainNames(`brb${network.replace('berth-allow-', '')}`)
  const table = execFileSync('iptables', ['-w', '-S'], { encoding: 'utf8' })
  return [forward, input].filter((c) => table.includes(`-N ${c}`))
}

describe.each(RUNTIMES)('prune on %s', (name) => {
  const engine = name !== 'local'
  const a = { dir: mkdtempSync(join(tmpdir(), 'berth-prune-a-')), pool: uniquePoolName(`prune-a-${name}`) }
  const b = { dir: mkdtempSync(join(tmpdir(), 'berth-prune-b-')), pool: uniquePoolName(`prune-b-${name}`) }
  const rtA = runtimeFor(name, a.dir)
  const rtB = runtimeFor(name, b.dir)
  const image = engine ? readEngine(name).image : 'local'
  // Allowlists unique to this run: A's own network, and one A and B share.
  const port = () => 20_000 + (randomBytes(2).readUInt16BE() % 40_000)
  const allow = (p: number): EgressPolicy => ({
    policy: 'allowlist',
    allow: [{ host: '10.254.254.254', ports: [p] }],
    allowPrivate: true,
  })
  const own = allow(port())
  const shared = allow(port())
  // B's, its container gone: unused for now, as between two of B's tasks.
  const idle = allow(port())
  const net = (policy: EgressPolicy) => egressNetwork(policy, name)!.name
  const volA = `berth-ws-prune-${randomBytes(4).toString('hex')}`
  const volB = `berth-ws-prune-${randomBytes(4).toString('hex')}`
  const orphan = `berth-${randomBytes(6).toString('hex')}`

  afterAll(async () => {
    for (const [rt, pool] of [
      [rtA, a.pool],
      [rtB, b.pool],
    ] as const) {
      const used = new Set((await rt.pruneNetworks?.(pool, { dryRun: true }))?.map((n) => n.name))
      for (const c of await rt.list({ labels: { 'berth.pool': pool }, all: true })) await rt.remove(c.id)
      for (const v of await rt.listVolumes({ labels: { 'berth.pool': pool } })) await rt.removeVolume(v.name)
      await rt.pruneNetworks?.(pool, { used })
      await rt.close?.()
    }
    for (const { dir } of [a, b])
      for (const f of readdirSync(join(dir, 'disks')).filter((n) => n.endsWith('.img')))
        await releaseDisk(join(dir, 'disks', f.slice(0, -'.img'.length)))
    rmSync(a.dir, { recursive: true, force: true })
    rmSync(b.dir, { recursive: true, force: true })
  })

  it('lists everything of the deployment in a dry run, removes it all, and nothing of another deployment', async () => {
    const make = async (rt: ContainerRuntime, pool: string, extra: object) => {
      const { id, name: made } = await rt.create({
        image,
        cmd: [...IDLE_COMMAND],
        workingDir: '/workspace',
        labels: { 'berth.pool': pool },
        limits: { diskBytes: 64 * 1024 ** 2, tmpBytes: 16 * 1024 ** 2 },
        ...extra,
      })
      await rt.start(id)
      return made
    }
    const ctrA = await make(rtA, a.pool, engine ? { egress: own } : {})
    const ctrA2 = engine ? await make(rtA, a.pool, { egress: shared }) : undefined
    const ctrB = await make(rtB, b.pool, engine ? { egress: shared } : {})
    if (engine) {
      const gone = await make(rtB, b.pool, { egress: idle })
      const made = (await rtB.list({ labels: { 'berth.pool': b.pool }, all: true })).find((c) => c.name === gone)!
      await rtB.remove(made.id)
    }
    await rtA.createVolume(volA, { labels: { 'berth.pool': a.pool }, sizeBytes: 32 * 1024 ** 2 })
    await rtB.createVolume(volB, { labels: { 'berth.pool': b.pool }, sizeBytes: 32 * 1024 ** 2 })
    // A disk a server killed between making it and creating its container leaves.
    await workspaceDisks({ dir: join(a.dir, 'disks') }).make(orphan, 16 * 1024 ** 2)
    const disksA = () => readdirSync(join(a.dir, 'disks')).filter((f) => f.endsWith('.img'))
    const disksOfA = engine ? 4 : 3 // A's containers', its volume's, the orphan
    expect(disksA()).toHaveLength(disksOfA)
    if (name === 'local') expect(mountsUnder(a.dir).length).toBeGreaterThanOrEqual(3) // disks and the sandbox's /tmp

    const dry = await prune(settings(name, a.dir, a.pool), ['--dry-run'])
    expect(dry.code, dry.output).toBe(0)
    for (const item of [ctrA, volA, join(a.dir, 'disks', orphan), ...(engine ? [ctrA2!, net(own)] : [])])
      expect(dry.output).toContain(item)
    for (const item of [ctrB, volB, ...(engine ? [net(shared), net(idle)] : [])]) expect(dry.output).not.toContain(item)
    expect(dry.output).toContain('nothing removed')
    // Nothing went.
    expect(await rtA.list({ labels: { 'berth.pool': a.pool }, all: true })).toHaveLength(engine ? 2 : 1)
    expect(await rtA.listVolumes({ labels: { 'berth.pool': a.pool } })).toHaveLength(1)
    expect(disksA()).toHaveLength(disksOfA)
    if (engine) expect(chainsOf(net(own))).toHaveLength(2)

    const run = await prune(settings(name, a.dir, a.pool))
    expect(run.code, run.output).toBe(0)
    expect(await rtA.list({ labels: { 'berth.pool': a.pool }, all: true })).toEqual([])
    expect(await rtA.listVolumes({ labels: { 'berth.pool': a.pool } })).toEqual([])
    expect(disksA()).toEqual([])
    expect(mountsUnder(a.dir)).toEqual([])
    if (engine) {
      expect(chainsOf(net(own))).toEqual([])
      const networks = execFileSync(name, ['network', 'ls', '--format', '{{.Name}}'], { encoding: 'utf8' })
      expect(networks).not.toContain(net(own))
      expect(networks).toContain(net(shared)) // B's container still uses it
      expect(chainsOf(net(shared))).toHaveLength(2)
      // An unused network A's containers were never on is not A's to remove.
      expect(networks).toContain(net(idle))
      expect(chainsOf(net(idle))).toHaveLength(2)
      await rtB.pruneNetworks?.(b.pool, { used: new Set([net(idle)]) })
      expect(chainsOf(net(idle))).toEqual([])
    }
    // Everything of B is still there, running.
    const left = await rtB.list({ labels: { 'berth.pool': b.pool }, all: true })
    expect(left.map((c) => [c.name, c.state])).toEqual([[ctrB, 'running']])
    expect((await rtB.listVolumes({ labels: { 'berth.pool': b.pool } })).map((v) => v.name)).toEqual([volB])
    expect(mountsUnder(b.dir).length).toBeGreaterThan(0)

    // A second run finds nothing left.
    const again = await prune(settings(name, a.dir, a.pool), ['--dry-run'])
    expect(again.output).toContain('0 item(s) listed')
  }, 180_000)
})

describe('prune while a server of the deployment runs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-prune-server-'))
  const pool = uniquePoolName('prune-server')
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('is refused while the server runs (and after one was killed, until its lease lapses), then runs', async () => {
    const env = { ...settings('local', dir, pool), BERTH_STORAGE: 'memory', BERTH_METRICS: 'off', BERTH_POOL_MIN: '0' }
    const server = await berthFromConfig(configFromEnv(env), { warn: () => {} })
    const refused = await prune(env, ['--dry-run'])
    await server.close()
    expect(refused.code, refused.output).toBe(3)
    expect(refused.output).toMatch(/refused: a server of this deployment is running \(pid \d+ on /)
    expect((await prune(env, ['--dry-run'])).code).toBe(0)

    // A server killed outright leaves its lease: refused until 30 s after its last renewal.
    const lease = join(dir, SERVER_LEASE_FILE)
    writeFileSync(lease, JSON.stringify({ pid: 999_999, host: 'gone' }))
    expect((await prune(env, ['--dry-run'])).code).toBe(3)
    const past = new Date(Date.now() - 31_000)
    utimesSync(lease, past, past)
    const after = await prune(env)
    expect(after.code, after.output).toBe(0)
    expect(existsSync(lease)).toBe(true) // the data dir stays as it was
  })
})

describe('prune while an instance of the deployment is alive on its Redis', () => {
  let redis: LocalRedis
  const dir = mkdtempSync(join(tmpdir(), 'berth-prune-redis-'))
  beforeAll(async () => {
    redis = await startRedis()
  })
  afterAll(async () => {
    await redis?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('is refused while its instance id is alive there (not for another instance), and runs once it stopped', async () => {
    const prefix = `prune-${randomBytes(3).toString('hex')}:`
    const env = {
      ...settings('local', dir, uniquePoolName('prune-redis')),
      BERTH_STORAGE: 'redis',
      BERTH_REDIS_URL: redis.path,
      BERTH_REDIS_PREFIX: prefix,
      BERTH_INSTANCE_ID: 'prune-a',
    }
    const instance = (instanceId: string) =>
      createCoordination({ driver: 'redis', url: redis.path, prefix, instanceId })
    const other = await instance('prune-b')
    expect((await prune(env, ['--dry-run'])).code).toBe(0)
    const mine = await instance('prune-a')
    const refused = await prune(env, ['--dry-run'])
    expect(refused.code, refused.output).toBe(3)
    expect(refused.output).toContain(`instance prune-a of this deployment is alive on its Redis (prefix ${prefix})`)
    await mine.close()
    expect((await prune(env, ['--dry-run'])).code).toBe(0)
    await other.close()
  })
})
