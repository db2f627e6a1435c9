import { describe, expect, it } from 'vitest'
import { ROOTFUL_SOCKET, discoverPodman, parseEngineUrl } from '../src/discovery.js'

const all = () => true
const none = () => false

describe('discoverPodman', () => {
  it('prefers CONTAINER_HOST', () => {
    expect(discoverPodman({ env: { CONTAINER_HOST: 'unix:///custom/podman.sock' }, uid: 0, exists: all })).toEqual({
      connection: { socketPath: '/custom/podman.sock' },
      source: 'CONTAINER_HOST',
    })
    expect(
      discoverPodman({ env: { CONTAINER_HOST: 'tcp://127.0.0.1:8888' }, uid: 1000, exists: none }).connection,
    ).toEqual({
      host: '127.0.0.1',
      port: 8888,
      protocol: 'http',
    })
  })

  it('uses the rootful socket as root', () => {
    expect(discoverPodman({ env: { XDG_RUNTIME_DIR: '/run/user/0' }, uid: 0, exists: all })).toEqual({
      connection: { socketPath: ROOTFUL_SOCKET },
      source: 'rootful',
    })
  })

  it('uses the rootless socket under XDG_RUNTIME_DIR, else /run/user/<uid>, for other users', () => {
    expect(discoverPodman({ env: { XDG_RUNTIME_DIR: '/run/user/1000' }, uid: 1000, exists: all }).connection).toEqual({
      socketPath: '/run/user/1000/podman/podman.sock',
    })
    expect(discoverPodman({ env: {}, uid: 1234, exists: all }).connection).toEqual({
      socketPath: '/run/user/1234/podman/podman.sock',
    })
  })

  it('falls back to a rootful socket a user can see, then to DOCKER_HOST naming podman', () => {
    expect(discoverPodman({ env: {}, uid: 1000, exists: (p) => p === ROOTFUL_SOCKET }).source).toBe('rootful')
    expect(
      discoverPodman({
        env: { DOCKER_HOST: 'unix:///srv/podman/podman.sock' },
        uid: 1000,
        exists: (p) => p.startsWith('/srv'),
      }),
    ).toEqual({ connection: { socketPath: '/srv/podman/podman.sock' }, source: 'DOCKER_HOST' })
    // DOCKER_HOST pointing at Docker is not Podman.
    expect(discoverPodman({ env: { DOCKER_HOST: 'unix:///var/run/docker.sock' }, uid: 0, exists: none }).source).toBe(
      'rootful',
    )
  })

  it('returns the first candidate when nothing exists, so errors name a path', () => {
    expect(discoverPodman({ env: { XDG_RUNTIME_DIR: '/run/user/7' }, uid: 7, exists: none }).connection).toEqual({
      socketPath: '/run/user/7/podman/podman.sock',
    })
  })
})

describe('parseEngineUrl', () => {
  it('parses unix, tcp and https; refuses ssh', () => {
    expect(parseEngineUrl('unix:///a.sock')).toEqual({ socketPath: '/a.sock' })
    expect(parseEngineUrl('https://h:9443')).toEqual({ host: 'h', port: 9443, protocol: 'https' })
    expect(parseEngineUrl('ssh://core@host/run/podman/podman.sock')).toBeNull()
  })
})
