/**
 * Remote engines: a standalone server whose engine is only reachable as `tcp://host:port`
 * (a local TCP listener forwarding to the engine's unix socket, as a remote Docker or Podman
 * host's API would be) runs a task there; `auto` asks the engine which one it is. The same
 * over `ssh://user@host:port` (a private sshd on 127.0.0.1, the key in an ssh-agent, the
 * docker CLI's `docker system dial-stdio` on the far side). And the setting's refusals.
 */
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readEngine } from '@berth/testkit'
import { configFromEnv } from '../src/config.js'
import {
  ENDED,
  SERVER,
  pollTask,
  startInstance,
  startSshd,
  tcpProxy,
  userWithProfile,
  type Instance,
  type TcpProxy,
} from './multi-instance.helpers.js'
import { clientFor } from './helpers.js'
import { engineRuntime, onEngine, sweep } from './pool.helpers.js'
import { REPO_ROOT, bareEnv, freePort, startStandalone } from './standalone.helpers.js'

describe('BERTH_ENGINE_URL=tcp://… : an engine reached over TCP', () => {
  let proxy: TcpProxy
  let server: Instance | undefined
  beforeAll(async () => {
    proxy = await tcpProxy(readEngine('docker').socketPath)
  })
  afterAll(async () => {
    await server?.stop()
    if (server) await sweep(engineRuntime('docker').runtime, server.pool)
    if (server) rmSync(server.dataDir, { recursive: true, force: true })
    await proxy.close()
  })

  it('runs a task on it; with BERTH_RUNTIME=auto the engine is recognised as Docker', async () => {
    // Memory storage: this case is about the engine only.
    server = await startInstance({
      id: 'tcp',
      engine: 'docker',
      engineUrl: process.env.MI_UNIX ? 'unix:///var/run/docker.sock' : proxy.url,
      settings: { BERTH_STORAGE: 'memory', BERTH_RUNTIME: 'auto' },
    })
    expect(server.output()).toContain(`Runtime: docker (http://${proxy.url.slice('tcp://'.length)}, BERTH_ENGINE_URL)`)
    const before = proxy.connections()
    expect(before).toBeGreaterThan(0)
    const { token, profileId } = await userWithProfile(server.url, 'Remote')
    const api = clientFor(server, token)
    const sub = await api.tasks.submit({
      body: {
        mode: 'batch',
        profile_id: profileId,
        prompt: 'Where am I? [[berth:tool Bash {"command":"echo remote-engine-ok"}]]',
      },
    })
    const done = await pollTask(api, sub.task_id, (t) => ENDED.includes(t.status), 90_000)
    expect(done.status, `${JSON.stringify(done)}\n--- server ---\n${server.output()}`).toBe('completed')
    expect(JSON.stringify(done.result?.tool_calls)).toContain('remote-engine-ok')
    // The task's container work went through the proxy, and the container is on that engine under the pool's label.
    expect(proxy.connections()).toBeGreaterThan(before)
    expect((await onEngine(engineRuntime('docker').runtime, server.pool)).length).toBeGreaterThan(0)
  }, 240_000)

  it('a Podman engine behind tcp:// is recognised as Podman', async () => {
    const podman = await tcpProxy(readEngine('podman').socketPath)
    const port = await freePort()
    const s = await startStandalone({
      command: SERVER,
      cwd: join(REPO_ROOT, 'examples/standalone-server'),
      port,
      env: bareEnv({
        PORT: String(port),
        BERTH_STORAGE: 'memory',
        BERTH_RUNTIME: 'auto',
        BERTH_ENGINE_URL: podman.url,
        BERTH_POOL_MIN: '0',
        BERTH_DATA_DIR: join(REPO_ROOT, '.tmp', `mi-podman-${port}`),
      }),
    })
    try {
      expect(s.output()).toContain(`Runtime: podman (http://${podman.url.slice('tcp://'.length)}, BERTH_ENGINE_URL)`)
    } finally {
      await s.stop()
      await podman.close()
      rmSync(join(REPO_ROOT, '.tmp', `mi-podman-${port}`), { recursive: true, force: true })
    }
  }, 120_000)

  it('an engine that does not answer stops the start-up with its address', async () => {
    const port = await freePort()
    const dead = await freePort()
    await expect(
      startStandalone({
        command: SERVER,
        cwd: join(REPO_ROOT, 'examples/standalone-server'),
        port,
        env: bareEnv({
          PORT: String(port),
          BERTH_STORAGE: 'memory',
          BERTH_RUNTIME: 'docker',
          BERTH_ENGINE_URL: `tcp://127.0.0.1:${dead}`,
        }),
      }),
    ).rejects.toThrow(
      new RegExp(`BERTH_ENGINE_URL: docker \\(http://127\\.0\\.0\\.1:${dead}, BERTH_ENGINE_URL\\) does not answer`),
    )
  }, 60_000)
})

describe('BERTH_ENGINE_URL=ssh://… : a Docker host reached over SSH', () => {
  it('runs a task on it, authenticated by the agent at SSH_AUTH_SOCK', async () => {
    const sshd = await startSshd()
    let server: Instance | undefined
    try {
      server = await startInstance({
        id: 'ssh',
        engine: 'docker',
        engineUrl: sshd.url,
        settings: { BERTH_STORAGE: 'memory', SSH_AUTH_SOCK: sshd.agentSocket },
      })
      expect(server.output()).toContain(`Runtime: docker (${sshd.url}, BERTH_ENGINE_URL)`)
      const { token, profileId } = await userWithProfile(server.url, 'Ssh')
      const api = clientFor(server, token)
      const sub = await api.tasks.submit({
        body: {
          mode: 'batch',
          profile_id: profileId,
          prompt: 'Over SSH. [[berth:tool Bash {"command":"echo ssh-engine-ok"}]]',
        },
      })
      const done = await pollTask(api, sub.task_id, (t) => ENDED.includes(t.status), 90_000)
      expect(done.status, `${JSON.stringify(done)}\n--- server ---\n${server.output()}`).toBe('completed')
      expect(JSON.stringify(done.result?.tool_calls)).toContain('ssh-engine-ok')
    } finally {
      await server?.stop()
      if (server) await sweep(engineRuntime('docker').runtime, server.pool)
      if (server) rmSync(server.dataDir, { recursive: true, force: true })
      await sshd.stop()
    }
  }, 240_000)

  it('without the key in an agent, the start-up stops naming the engine', async () => {
    const sshd = await startSshd()
    const port = await freePort()
    try {
      await expect(
        startStandalone({
          command: SERVER,
          cwd: join(REPO_ROOT, 'examples/standalone-server'),
          port,
          env: bareEnv({
            PORT: String(port),
            BERTH_STORAGE: 'memory',
            BERTH_RUNTIME: 'docker',
            BERTH_ENGINE_URL: sshd.url,
          }),
        }),
      ).rejects.toThrow(
        new RegExp(
          `BERTH_ENGINE_URL: docker \\(${sshd.url.replace(/[.]/g, '\\.')}, BERTH_ENGINE_URL\\) does not answer`,
        ),
      )
    } finally {
      await sshd.stop()
    }
  }, 60_000)
})

describe('BERTH_ENGINE_URL in the configuration', () => {
  it('takes unix, tcp, https and ssh engine URLs', () => {
    for (const url of [
      'unix:///var/run/docker.sock',
      '/run/podman/podman.sock',
      'tcp://10.0.0.5:2375',
      'https://engine.internal:2376',
      'ssh://ops@build-02',
    ]) {
      expect(configFromEnv({ BERTH_ENGINE_URL: url }).engineUrl).toBe(url)
    }
    expect(configFromEnv({ BERTH_ENGINE_URL: '' }).engineUrl).toBeUndefined()
    expect(
      configFromEnv({}, { values: { engineUrl: 'tcp://10.0.0.5:2375' }, path: 'berth.config.json' }).engineUrl,
    ).toBe('tcp://10.0.0.5:2375')
  })

  it('refuses what is not an engine URL, and an engine with the local runtime', () => {
    expect(() => configFromEnv({ BERTH_ENGINE_URL: 'ftp://host' })).toThrow(
      /BERTH_ENGINE_URL must be unix:\/\/\/path, tcp:\/\/host:port.*got "ftp:\/\/host"/,
    )
    expect(() => configFromEnv({ BERTH_ENGINE_URL: 'tcp://' })).toThrow(/BERTH_ENGINE_URL must be/)
    expect(() => configFromEnv({ BERTH_ENGINE_URL: 'tcp://10.0.0.5', BERTH_RUNTIME: 'local' })).toThrow(
      /BERTH_ENGINE_URL names an engine, but BERTH_RUNTIME is local/,
    )
  })
})
