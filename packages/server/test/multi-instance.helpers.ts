/**
 * Several standalone servers as real child processes on one real Redis, each driving its own
 * engine; a TCP→unix-socket proxy that makes a local engine a "remote" `tcp://` one.
 */
import { execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { BerthClient, Task } from '@berth/client'
import { readEngine } from '@berth/testkit'
import { expect, vi } from 'vitest'
import { clientFor, ENDED, waitForTask } from './helpers.js'
import { REPO_ROOT, bareEnv, freePort, startStandalone, type Standalone } from './standalone.helpers.js'

const MAIN = join(REPO_ROOT, 'examples/standalone-server/src/main.ts')
/** As `pnpm start` runs it: `node --import tsx src/main.ts`, tsx resolved from the example. */
export const SERVER = [
  process.execPath,
  '--import',
  pathToFileURL(join(REPO_ROOT, 'examples/standalone-server/node_modules/tsx/dist/loader.mjs')).href,
  MAIN,
]

/** A TCP listener on 127.0.0.1 forwarding every connection to a unix socket (an engine's API). */
export interface TcpProxy {
  url: string
  /** Connections forwarded so far. */
  connections(): number
  close(): Promise<void>
}

/**
 * Forward `127.0.0.1:<free port>` to `socketPath`, so the engine is reached as `tcp://…`.
 *
 * @example
 * ```ts
 * const proxy = await tcpProxy('/var/run/docker.sock') // proxy.url: 'tcp://127.0.0.1:40123'
 * ```
 */
export async function tcpProxy(socketPath: string): Promise<TcpProxy> {
  const open = new Set<Socket>()
  let count = 0
  // Half-open both ways: an exec's stdin ends with a FIN while its output still flows back.
  const server: Server = createServer({ allowHalfOpen: true }, (client) => {
    count++
    const engine = createConnection({ path: socketPath, allowHalfOpen: true })
    open.add(client).add(engine)
    client.pipe(engine).pipe(client)
    const end = () => {
      client.destroy()
      engine.destroy()
      open.delete(client)
      open.delete(engine)
    }
    client.on('error', end).on('close', end)
    engine.on('error', end).on('close', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    url: `tcp://127.0.0.1:${port}`,
    connections: () => count,
    close: () => {
      for (const s of open) s.destroy()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** One standalone server of the group, with what it was started with. */
export interface Instance extends Standalone {
  id: string
  engine: 'docker' | 'podman'
  pool: string
  dataDir: string
  env: Record<string, string>
}

export const ADMIN = `operator-${randomBytes(6).toString('hex')}`

/**
 * Start a standalone server on `engine` (reached at `engineUrl`, default its local socket)
 * with `settings` on top of: redis storage and coordination, the engine's test image, its
 * own pool name, data dir, port and instance id, and an admin token.
 *
 * @example
 * ```ts
 * const a = await startInstance({ id: 'a', engine: 'docker', settings: { BERTH_REDIS_URL: redis.path } })
 * ```
 */
export async function startInstance(opts: {
  id: string
  engine: 'docker' | 'podman'
  engineUrl?: string
  pool?: string
  dataDir?: string
  /** The port to listen on (default: a free one), e.g. one its own settings name. */
  port?: number
  settings: Record<string, string>
}): Promise<Instance> {
  const info = readEngine(opts.engine)
  const pool = opts.pool ?? `t-mi-${opts.id}-${process.pid}-${randomBytes(3).toString('hex')}`
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), `berth-mi-${opts.id}-`))
  const port = opts.port ?? (await freePort())
  const env = bareEnv({
    PORT: String(port),
    BERTH_ADMIN_TOKEN: ADMIN,
    BERTH_STORAGE: 'redis',
    BERTH_INSTANCE_ID: opts.id,
    BERTH_DATA_DIR: dataDir,
    BERTH_POOL_NAME: pool,
    BERTH_RUNTIME: opts.engine,
    BERTH_ENGINE_URL: opts.engineUrl ?? `unix://${info.socketPath}`,
    BERTH_IMAGE: info.image,
    BERTH_POOL_MIN: '1',
    ...opts.settings,
  })
  const s = await startStandalone({
    command: SERVER,
    cwd: join(REPO_ROOT, 'examples/standalone-server'),
    env,
    port,
    timeoutMs: 180_000,
  })
  return { ...s, id: opts.id, engine: opts.engine, pool, dataDir, env }
}

/** SIGKILL to the instance's whole process group (no shutdown of any kind); resolves once it is gone. */
export async function killHard(i: Instance): Promise<void> {
  const gone = new Promise<void>((resolve) =>
    i.child.exitCode !== null || i.child.signalCode !== null ? resolve() : i.child.once('exit', () => resolve()),
  )
  process.kill(-i.child.pid!, 'SIGKILL')
  await gone
}

/** A new user (through `via`) with a stub credential and a Bash profile: its token and profile id. */
export async function userWithProfile(via: string, name: string): Promise<{ token: string; profileId: string }> {
  const made = await clientFor({ url: via }, ADMIN).admin.users.create({ body: { name } })
  const token = made.key.token
  const api = clientFor({ url: via }, token)
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const profile = await api.profiles.create({
    body: {
      name: 'Agent',
      slug: `agent-${randomBytes(3).toString('hex')}`,
      api_key_id: key.id,
      default_tools: ['Bash'],
    },
  })
  return { token, profileId: profile.id }
}

/**
 * Ask `api` for the task until `done` holds; the last view. Every 1.5 s: the standalone
 * servers keep their default rate limit, and a 429 only means "ask again later".
 */
export const pollTask = (
  api: BerthClient,
  taskId: string,
  done: (t: Task) => boolean,
  timeoutMs: number,
): Promise<Task> => waitForTask(api, taskId, { until: done, timeout: timeoutMs, interval: 1_500 })

export { ENDED }

/** A private sshd on 127.0.0.1 that lets this user in with a throwaway key held by its own ssh-agent. */
export interface LocalSshd {
  /** `ssh://<user>@127.0.0.1:<port>`. */
  url: string
  /** The agent's socket (`SSH_AUTH_SOCK`). */
  agentSocket: string
  stop(): Promise<void>
}

/**
 * Start Debian's sshd (installed by `scripts/ssh/ensure.sh` when missing) on a free port with
 * fresh host and client keys, and an ssh-agent holding the client key.
 *
 * @example
 * ```ts
 * const sshd = await startSshd() // BERTH_ENGINE_URL=sshd.url, SSH_AUTH_SOCK=sshd.agentSocket
 * ```
 */
export async function startSshd(): Promise<LocalSshd> {
  const bin = execFileSync('bash', [join(REPO_ROOT, 'scripts/ssh/ensure.sh')], { encoding: 'utf8' }).trim()
  const dir = mkdtempSync(join(tmpdir(), 'berth-sshd-'))
  const key = (name: string) => execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, name)])
  key('host_key')
  key('client_key')
  execFileSync('cp', [join(dir, 'client_key.pub'), join(dir, 'authorized_keys')])
  const port = await freePort()
  const config = [
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    `HostKey ${join(dir, 'host_key')}`,
    `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
    'PermitRootLogin prohibit-password',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'UsePAM no',
    'StrictModes no',
    `PidFile ${join(dir, 'sshd.pid')}`,
  ]
  writeFileSync(join(dir, 'sshd_config'), `${config.join('\n')}\n`)
  // sshd's privilege separation directory.
  execFileSync('mkdir', ['-p', '/run/sshd'])
  const sshd = spawn(bin, ['-D', '-e', '-f', join(dir, 'sshd_config')], { stdio: ['ignore', 'ignore', 'pipe'] })
  let log = ''
  sshd.stderr!.on('data', (d: Buffer) => (log += d.toString()))
  const agentSocket = join(dir, 'agent.sock')
  const agent = spawn('ssh-agent', ['-D', '-a', agentSocket], { stdio: 'ignore' })
  const stop = async () => {
    for (const child of [sshd, agent]) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await vi.waitFor(
      () =>
        execFileSync('ssh-add', [join(dir, 'client_key')], {
          env: { ...process.env, SSH_AUTH_SOCK: agentSocket },
          stdio: 'ignore',
        }),
      { timeout: 10_000, interval: 50 },
    )
  } catch (err) {
    await stop()
    throw new Error(`ssh-agent did not take the key: ${String(err)}`)
  }
  const listens = () =>
    new Promise<boolean>((r) =>
      createConnection(port, '127.0.0.1')
        .once('connect', function (this: Socket) {
          this.destroy()
          r(true)
        })
        .once('error', () => r(false)),
    )
  try {
    await vi.waitFor(
      async () => {
        if (sshd.exitCode !== null) return
        expect(await listens(), 'sshd listens').toBe(true)
      },
      { timeout: 10_000, interval: 50 },
    )
    if (sshd.exitCode !== null) throw new Error('sshd exited')
  } catch {
    await stop()
    throw new Error(`sshd did not listen: ${log}`)
  }
  return { url: `ssh://${userInfo().username}@127.0.0.1:${port}`, agentSocket, stop }
}
