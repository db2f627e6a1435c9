/**
 * The server image (`pnpm image`) deployed as the README's compose example does: two
 * containers of it on Docker, one Redis (storage and coordination), the engine's socket
 * mounted, settings as env, the default bridge network. A user and key made through the
 * admin API of one; a task completed through each, in task containers of the agent image
 * that reach the broker through the data volume. The image is reused when its recipe is
 * unchanged; everything made here is removed.
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import { startRedis, waitUntil, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest'
import { buildServerImage, type ServerImage } from '../../../examples/standalone-server/image/build.js'
import { RUN_LABEL } from '../../../vitest.leftovers.js'
import { clientFor } from './helpers.js'
import { ADMIN, ENDED, pollTask, userWithProfile } from './multi-instance.helpers.js'

const SOCKET = '/var/run/docker.sock'
const run = `t-img-${process.pid}-${randomBytes(3).toString('hex')}`

const docker = (...args: string[]): string =>
  execFileSync('docker', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim()

/** One server container: its name, pool, data volume and published URL. */
interface Instance {
  name: string
  pool: string
  volume: string
  url: string
}

function startContainer(image: string, id: string, redis: LocalRedis, key: string): Instance {
  const name = `${run}-${id}`
  const pool = `${run}-pool-${id}`
  const labels = ['--label', `${RUN_LABEL}=${inject('berthTestRunId')}`]
  docker('volume', 'create', ...labels, name)
  const env = {
    BERTH_ADMIN_TOKEN: ADMIN,
    BERTH_ENCRYPTION_KEY: key,
    BERTH_STORAGE: 'redis',
    BERTH_REDIS_URL: redis.path,
    BERTH_INSTANCE_ID: id,
    BERTH_POOL_NAME: pool,
    BERTH_POOL_MIN: '1',
  }
  docker(
    'run',
    '-d',
    '--name',
    name,
    ...labels,
    // The engine's socket belongs to its group; the server user joins it, and stays non-root.
    '--group-add',
    String(statSync(SOCKET).gid),
    '-v',
    `${SOCKET}:${SOCKET}`,
    '-v',
    `${name}:/data`,
    // The test's Redis listens on a unix socket: the same path inside.
    '-v',
    `${dirname(redis.path)}:${dirname(redis.path)}`,
    '-p',
    '127.0.0.1::3000',
    '--health-interval',
    '2s',
    ...Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
    image,
  )
  const port = docker('port', name, '3000/tcp').split('\n')[0]!.split(':').pop()
  return { name, pool, volume: name, url: `http://127.0.0.1:${port}` }
}

const health = (name: string) => docker('inspect', '--format', '{{.State.Health.Status}}', name)

describe('the server image, two containers on Docker against one Redis', () => {
  let image: ServerImage
  let redis: LocalRedis
  const instances: Instance[] = []

  beforeAll(async () => {
    image = await buildServerImage()
    redis = await startRedis()
    // The containers' user is not root: it may reach the socket (the directory is private).
    chmodSync(dirname(redis.path), 0o755)
    chmodSync(redis.path, 0o777)
    const key = randomBytes(32).toString('base64')
    for (const id of ['a', 'b']) instances.push(startContainer(image.server, id, redis, key))
  }, 900_000)

  afterAll(async () => {
    for (const i of instances) {
      // SIGTERM: the server drains and closes; then its pool's containers and volumes go.
      execFileSync('docker', ['rm', '-f', '-v', i.name], { stdio: 'ignore' })
      for (const c of docker('ps', '-aq', '--filter', `label=berth.pool=${i.pool}`).split('\n').filter(Boolean))
        docker('rm', '-f', '-v', c)
      for (const v of docker('volume', 'ls', '-q', '--filter', `label=berth.pool=${i.pool}`)
        .split('\n')
        .filter(Boolean))
        docker('volume', 'rm', '-f', v)
      docker('volume', 'rm', '-f', i.volume)
    }
    await redis?.stop()
  }, 120_000)

  it('carries its version, a non-root user, /data, PORT and a health check', () => {
    const config = JSON.parse(docker('image', 'inspect', '--format', '{{json .Config}}', image.server)) as {
      User: string
      Volumes: Record<string, unknown>
      Env: string[]
      Labels: Record<string, string>
      Healthcheck?: { Test: string[] }
    }
    expect(config.Labels['org.opencontainers.image.version']).toBe(image.version)
    expect(config.User).not.toMatch(/^(0|root)(:|$)/)
    expect(Object.keys(config.Volumes)).toEqual(['/data'])
    expect(config.Env).toContain('PORT=3000')
    expect(config.Env).toContain(`BERTH_IMAGE=${image.agent}`)
    expect(config.Healthcheck?.Test.join(' ')).toContain('/health')
  })

  it('runs a task through each container; the engine reports them healthy', async () => {
    for (const i of instances) {
      await waitUntil(() => health(i.name) === 'healthy', {
        what: `${i.name} healthy`,
        timeout: 180_000,
        interval: 1_000,
      }).catch((err: Error) => {
        throw new Error(`${err.message}\n${docker('logs', '--tail', '40', i.name)}`)
      })
    }
    const [a, b] = instances as [Instance, Instance]
    // Made through one container's admin API, known to the other through the shared store.
    const { token, profileId } = await userWithProfile(a.url, 'Image user')
    for (const i of [a, b]) {
      const api = clientFor(i, token)
      const word = `image-${i.name.slice(-1)}-ok`
      const sub = await api.tasks.submit({
        body: { mode: 'batch', profile_id: profileId, prompt: `[[berth:tool Bash {"command":"echo ${word}"}]]` },
      })
      const done = await pollTask(api, sub.task_id, (t) => ENDED.includes(t.status), 120_000)
      expect(done.status, `${JSON.stringify(done)}\n${docker('logs', '--tail', '40', i.name)}`).toBe('completed')
      expect(JSON.stringify(done.result?.tool_calls)).toContain(word)
    }
    // The tasks ran in containers of the agent image, in each server's own pool.
    for (const i of instances) {
      const images = docker('ps', '-a', '--filter', `label=berth.pool=${i.pool}`, '--format', '{{.Image}}')
      expect(images.split('\n')).toContain(image.agent)
    }
  }, 420_000)
})
