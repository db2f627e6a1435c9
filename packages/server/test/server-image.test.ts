/**
 * The server image (`pnpm image`) deployed by the README's compose file
 * (`examples/standalone-server/compose.yaml`, run by `docker compose`, or Debian's
 * `docker-compose` that scripts/compose/ensure.sh installs): two containers of it on Docker,
 * one Redis (storage and coordination), the engine's socket mounted, the default settings of
 * the image. A user and key made through the admin API of one; a task completed through
 * each, in task containers of the agent image that reach the broker through the data volume.
 * No registry is reachable, so the file's Redis image is one built from the host's
 * redis-server. The images are reused when their recipe is unchanged; everything the
 * compose project and its servers made is removed.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import { Readable } from 'node:stream'
import { hostImageRecipe } from '@berth/adapter-docker'
import { BerthError } from '@berth/client'
import { waitUntil } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildServerImage, type ServerImage } from '../../../examples/standalone-server/image/build.js'
import { clientFor } from './helpers.js'
import { ADMIN, ENDED, pollTask, userWithProfile } from './multi-instance.helpers.js'
import { readmeBlock } from './readme.helpers.js'
import { REPO_ROOT } from './standalone.helpers.js'

const SOCKET = '/var/run/docker.sock'
const FILE = join(REPO_ROOT, 'examples/standalone-server/compose.yaml')
const project = `t-img-${process.pid}-${randomBytes(3).toString('hex')}`
const SERVICES = ['berth-1', 'berth-2'] as const

const sh = (cmd: string, args: string[], env?: NodeJS.ProcessEnv): string =>
  execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env }).trim()
const docker = (...args: string[]) => sh('docker', args)

/** `docker compose` or `docker-compose`, whichever is installed (installed when neither is). */
const [composeBin, ...composeArgs] = sh('bash', [join(REPO_ROOT, 'scripts/compose/ensure.sh')]).split(' ') as [
  string,
  ...string[],
]

/** A Redis image of this host's redis-server (the file's `redis:7` cannot be pulled here). */
async function redisImage(): Promise<string> {
  const recipe = hostImageRecipe({ packages: ['redis-server', 'redis-tools'] })
  const ref = `berth-test-redis:${recipe.hash}`
  if (sh('docker', ['images', '-q', ref])) return ref
  const load = spawn('docker', ['import', '--change', 'CMD ["redis-server"]', '-', ref], {
    stdio: ['pipe', 'ignore', 'inherit'],
  })
  const exited = new Promise<number | null>((resolve) => load.on('exit', resolve))
  await pipeline(Readable.from(recipe.rootfs()), load.stdin)
  if ((await exited) !== 0) throw new Error(`docker import ${ref} failed`)
  return ref
}

describe('the server image, two containers of the compose file against one Redis', () => {
  let image: ServerImage
  let env: NodeJS.ProcessEnv
  const compose = (...args: string[]) => sh(composeBin, [...composeArgs, '-f', FILE, ...args], env)
  const urls = new Map<string, string>()

  beforeAll(async () => {
    image = await buildServerImage()
    env = {
      ...process.env,
      COMPOSE_PROJECT_NAME: project,
      BERTH_TAG: image.version,
      BERTH_REDIS_IMAGE: await redisImage(),
      DOCKER_GID: String(statSync(SOCKET).gid),
      BERTH_ADMIN_TOKEN: ADMIN,
      BERTH_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      // Loopback only, on ports the engine picks.
      BERTH_1_PORT: '127.0.0.1:',
      BERTH_2_PORT: '127.0.0.1:',
    }
    compose('up', '-d')
    for (const s of SERVICES) urls.set(s, `http://${compose('port', s, '3000').split('\n')[0]}`)
  }, 900_000)

  afterAll(() => {
    if (!env) return
    // SIGTERM first: each server drains and closes; then its pool's containers and volumes go.
    compose('down', '-v', '--timeout', '30')
    for (const s of SERVICES) {
      const pool = `berth.pool=${project}-${s.slice(-1)}`
      for (const c of docker('ps', '-aq', '--filter', `label=${pool}`).split('\n').filter(Boolean))
        docker('rm', '-f', '-v', c)
      for (const v of docker('volume', 'ls', '-q', '--filter', `label=${pool}`).split('\n').filter(Boolean))
        docker('volume', 'rm', '-f', v)
    }
  }, 120_000)

  it('is the compose file the README shows', () => {
    expect(`${readmeBlock('compose', 'yaml')}\n`).toBe(readFileSync(FILE, 'utf8'))
  })

  it('runs plain JavaScript as a non-root user, with /data, PORT and a health check, and ships no runner or TypeScript', () => {
    const config = JSON.parse(docker('image', 'inspect', '--format', '{{json .Config}}', image.server)) as {
      User: string
      Volumes: Record<string, unknown>
      Env: string[]
      Entrypoint: string[]
      Labels: Record<string, string>
      Healthcheck?: { Test: string[] }
    }
    expect(config.Labels['org.opencontainers.image.version']).toBe(image.version)
    expect(config.User).not.toMatch(/^(0|root)(:|$)/)
    expect(Object.keys(config.Volumes)).toEqual(['/data'])
    expect(config.Env).toContain('PORT=3000')
    expect(config.Env).toContain(`BERTH_IMAGE=${image.agent}`)
    expect(config.Entrypoint).toEqual(['node', 'dist/main.js'])
    expect(config.Healthcheck?.Test.join(' ')).toContain('/health')
    const listing = docker(
      'run',
      '--rm',
      '--entrypoint',
      '/bin/sh',
      image.server,
      '-c',
      'ls /opt; ls /opt/berth; ls /opt/berth/node_modules/.pnpm',
    ).split('\n')
    expect(listing).not.toContain('berth-runner')
    expect(listing).toContain('dist')
    expect(listing).not.toContain('src')
    expect(listing.filter((n) => /^(tsx|typescript|esbuild)@|claude-agent-sdk-linux/.test(n))).toEqual([])
  })

  it('refuses to start with a network policy it cannot enforce', () => {
    const name = `${project}-refused`
    const run = spawnSync(
      'docker',
      ['run', '--name', name, '-e', 'BERTH_ENV_POLICIES=none,public', '-e', 'BERTH_STORAGE=memory', image.server],
      // A loaded machine takes over a minute to load the server before the check.
      { encoding: 'utf8', timeout: 200_000 },
    )
    // A server that started instead is stopped here, not left running.
    spawnSync('docker', ['rm', '-f', name], { stdio: 'ignore' })
    expect(run.status).toBe(1)
    expect(run.stderr).toContain('BERTH_ENV_POLICIES lists public, which the server image cannot enforce')
  }, 240_000)

  it('runs a task through each container; the engine reports them healthy; public egress is a 400', async () => {
    for (const s of SERVICES) {
      const id = compose('ps', '-q', s)
      await waitUntil(() => docker('inspect', '--format', '{{.State.Health.Status}}', id) === 'healthy', {
        what: `${s} healthy`,
        timeout: 240_000,
        interval: 2_000,
      }).catch((err: Error) => {
        throw new Error(`${err.message}\n${docker('logs', '--tail', '40', id)}`)
      })
    }
    const [a, b] = SERVICES.map((s) => ({ url: urls.get(s)! }))
    // Made through one container's admin API, known to the other through the shared Redis.
    const { token, profileId } = await userWithProfile(a!.url, 'Image user')
    for (const [n, i] of [a!, b!].entries()) {
      const api = clientFor(i, token)
      const word = `image-${n}-ok`
      const sub = await api.tasks.submit({
        body: { mode: 'batch', profile_id: profileId, prompt: `[[berth:tool Bash {"command":"echo ${word}"}]]` },
      })
      const done = await pollTask(api, sub.task_id, (t) => ENDED.includes(t.status), 120_000)
      expect(done.status, JSON.stringify(done)).toBe('completed')
      expect(JSON.stringify(done.result?.tool_calls)).toContain(word)
    }
    // The tasks ran in containers of the agent image, in each server's own pool.
    for (const s of SERVICES) {
      const pool = `${project}-${s.slice(-1)}`
      const images = docker('ps', '-a', '--filter', `label=berth.pool=${pool}`, '--format', '{{.Image}}')
      expect(images.split('\n')).toContain(image.agent)
    }
    // An environment asking for the internet is refused up front, not failed at its first task.
    const refused = await clientFor(a!, token)
      .environments.create({ body: { name: 'Online', network: { policy: 'public' } } })
      .catch((err: BerthError) => err)
    expect(refused).toBeInstanceOf(BerthError)
    expect(refused).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' })
    expect(JSON.stringify((refused as BerthError).details)).toContain('network.policy')
  }, 600_000)

  it("prune in the image: refused while its server runs; once stopped, removes that instance's containers, not the other's", () => {
    // The image's entry point with the subcommand, on berth-1's settings and data volume.
    const prune = (...args: string[]) =>
      spawnSync(composeBin, [...composeArgs, '-f', FILE, 'run', '--rm', '--no-deps', 'berth-1', 'prune', ...args], {
        env,
        encoding: 'utf8',
        timeout: 300_000,
      })
    const refused = prune('--dry-run')
    expect(refused.status, `${refused.stdout}${refused.stderr}`).toBe(3)
    expect(refused.stderr).toContain('prune: refused: a server of this deployment is running')
    compose('stop', 'berth-1')
    const names = (n: number) =>
      docker('ps', '-a', '--filter', `label=berth.pool=${project}-${n}`, '--format', '{{.Names}}')
        .split('\n')
        .filter(Boolean)
    const left = names(1)
    expect(left.length).toBeGreaterThan(0)
    const dry = prune('--dry-run')
    expect(dry.status, `${dry.stdout}${dry.stderr}`).toBe(0)
    for (const name of left) expect(dry.stdout).toContain(name)
    expect(names(1)).toEqual(left)
    const run = prune()
    expect(run.status, `${run.stdout}${run.stderr}`).toBe(0)
    expect(names(1)).toEqual([])
    expect(names(2).length).toBeGreaterThan(0)
  }, 600_000)
})
