import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { connectEngine } from '../src/connection.js'
import { engineUrlOptions } from '../src/engine-url.js'

describe('engineUrlOptions: an engine URL read as the docker CLI reads DOCKER_HOST', () => {
  const certs = mkdtempSync(join(tmpdir(), 'berth-engine-certs-'))
  for (const f of ['ca.pem', 'cert.pem', 'key.pem']) writeFileSync(join(certs, f), `${f} contents`)
  afterAll(() => rmSync(certs, { recursive: true, force: true }))

  it('a unix socket, as unix:// or a bare path', () => {
    expect(engineUrlOptions('unix:///run/podman/podman.sock')).toEqual({ socketPath: '/run/podman/podman.sock' })
    expect(engineUrlOptions('/var/run/docker.sock')).toEqual({ socketPath: '/var/run/docker.sock' })
  })

  it('tcp:// is plain HTTP on 2375 unless TLS is asked for', () => {
    expect(engineUrlOptions('tcp://10.0.0.5')).toEqual({ host: '10.0.0.5', port: 2375, protocol: 'http' })
    expect(engineUrlOptions('tcp://build-02.internal:8888')).toEqual({
      host: 'build-02.internal',
      port: 8888,
      protocol: 'http',
    })
    expect(engineUrlOptions('tcp://[fd00::5]:2375')).toEqual({ host: 'fd00::5', port: 2375, protocol: 'http' })
    expect(engineUrlOptions('http://10.0.0.5:80')).toEqual({ host: '10.0.0.5', port: 80, protocol: 'http' })
  })

  it('DOCKER_TLS_VERIFY (or port 2376) makes it TLS with the client certificate from DOCKER_CERT_PATH', () => {
    const tls = engineUrlOptions('tcp://10.0.0.5', { DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certs })
    expect(tls).toMatchObject({ host: '10.0.0.5', port: 2376, protocol: 'https' })
    expect(String(tls.ca)).toBe('ca.pem contents')
    expect(String(tls.cert)).toBe('cert.pem contents')
    expect(String(tls.key)).toBe('key.pem contents')
    expect(engineUrlOptions('tcp://10.0.0.5:2376', { DOCKER_CERT_PATH: certs })).toMatchObject({
      port: 2376,
      protocol: 'https',
    })
    // `0` and empty mean off, as for the docker CLI.
    expect(engineUrlOptions('tcp://10.0.0.5', { DOCKER_TLS_VERIFY: '0' })).toEqual({
      host: '10.0.0.5',
      port: 2375,
      protocol: 'http',
    })
    expect(engineUrlOptions('https://engine.example:443')).toEqual({
      host: 'engine.example',
      port: 443,
      protocol: 'https',
    })
  })

  it('a missing certificate file is named', () => {
    expect(() =>
      engineUrlOptions('tcp://10.0.0.5', { DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: join(certs, 'missing') }),
    ).toThrow(/cannot read .*missing\/ca\.pem \(ENOENT\)/)
  })

  it('ssh://user@host[:port] goes over SSH with the agent', () => {
    expect(engineUrlOptions('ssh://ops@build-02', { SSH_AUTH_SOCK: '/tmp/agent.sock' })).toEqual({
      host: 'build-02',
      port: 22,
      protocol: 'ssh',
      username: 'ops',
      sshOptions: { agent: '/tmp/agent.sock' },
    })
    expect(engineUrlOptions('ssh://build-02:2222')).toEqual({
      host: 'build-02',
      port: 2222,
      protocol: 'ssh',
      sshOptions: {},
    })
  })

  it('dockerode gets those options: the client reports the engine it talks to', () => {
    expect(connectEngine(engineUrlOptions('tcp://10.0.0.5:2375')).endpoint).toBe('http://10.0.0.5:2375')
    expect(connectEngine(engineUrlOptions('ssh://ops@build-02:2222')).endpoint).toBe('ssh://ops@build-02:2222')
    const modem = connectEngine(engineUrlOptions('ssh://ops@build-02', { SSH_AUTH_SOCK: '/tmp/agent.sock' })).docker
      .modem as unknown as Record<string, unknown>
    expect(modem).toMatchObject({ protocol: 'ssh', username: 'ops', host: 'build-02', port: 22 })
    expect(modem.sshOptions).toMatchObject({ agent: '/tmp/agent.sock' })
  })

  it('anything else is refused with the forms it takes', () => {
    expect(() => engineUrlOptions('npipe:////./pipe/docker_engine')).toThrow(
      /unsupported scheme "npipe".*tcp:\/\/host:port/,
    )
    expect(() => engineUrlOptions('docker-host')).toThrow(/not a URL/)
    expect(() => engineUrlOptions('unix://')).toThrow(/no socket path/)
    expect(() => engineUrlOptions('tcp://')).toThrow(/no host/)
  })
})
