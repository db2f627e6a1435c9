/**
 * Berth in a container of the engine it drives: bind sources it names are paths in its own
 * container, moved to the host paths of its mounts (a named volume's mount point, a bind's
 * source); outside a container, or against another engine, nothing changes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import type Docker from 'dockerode'
import { afterAll, describe, expect, it } from 'vitest'
import { hostPathMapper, ownContainerMounts, toHostPath } from '../src/host-paths.js'

const ID = 'a'.repeat(64)
const MOUNTS = [
  { source: '/var/lib/docker/volumes/berth-data/_data', destination: '/data' },
  { source: '/srv/keys', destination: '/data/keys' },
]

const dir = mkdtempSync(join(tmpdir(), 'berth-host-paths-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

function mountinfo(lines: string[]): string {
  const path = join(dir, `mountinfo-${lines.length}`)
  writeFileSync(path, `${lines.join('\n')}\n`)
  return path
}

/** An engine that knows one container, with these mounts; counts its inspects. */
function fakeEngine(known: string, mounts: { Source: string; Destination: string }[]) {
  const calls: string[] = []
  const docker = {
    getContainer: (id: string) => ({
      inspect: async () => {
        calls.push(id)
        if (id !== known) throw Object.assign(new Error('no such container'), { statusCode: 404 })
        return { Mounts: mounts }
      },
    }),
  } as unknown as Docker
  return { docker, calls }
}

describe('toHostPath', () => {
  it('moves a path to the host path of the deepest mount holding it', () => {
    expect(toHostPath('/data/broker/public', MOUNTS)).toBe('/var/lib/docker/volumes/berth-data/_data/broker/public')
    expect(toHostPath('/data', MOUNTS)).toBe('/var/lib/docker/volumes/berth-data/_data')
    expect(toHostPath('/data/keys/ca.pem', MOUNTS)).toBe('/srv/keys/ca.pem')
  })

  it('refuses a path on the container’s own filesystem, naming it', () => {
    expect(() => toHostPath('/opt/berth-runner', MOUNTS)).toThrow(/\/opt\/berth-runner is inside Berth's own container/)
    // A sibling with the same prefix is not inside the mount.
    expect(() => toHostPath('/database', MOUNTS)).toThrow(/inside Berth's own container/)
  })
})

describe('ownContainerMounts', () => {
  it('finds this container by the hostname file in mountinfo and reads its mounts', async () => {
    const { docker, calls } = fakeEngine(ID, [{ Source: '/var/lib/docker/volumes/v/_data', Destination: '/data' }])
    const info = mountinfo([
      `612 600 8:1 /var/lib/docker/containers/${ID}/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw`,
    ])
    expect(await ownContainerMounts(docker, info)).toEqual([
      { source: '/var/lib/docker/volumes/v/_data', destination: '/data' },
    ])
    expect(calls[0]).toBe(ID)
  })

  it('is null when the engine knows no such container (on the host, or another engine)', async () => {
    const { docker } = fakeEngine(ID, [])
    expect(await ownContainerMounts(docker, mountinfo(['22 1 8:1 / / rw - ext4 /dev/sda1 rw', 'x']))).toBeNull()
  })
})

describe('hostPathMapper', () => {
  it('rewrites bind sources only, asking the engine once', async () => {
    const { docker, calls } = fakeEngine(ID, [])
    // The hostname is the fallback id: make the engine know this one.
    const named = fakeEngine(hostname(), [{ Source: '/host/data', Destination: '/data' }])
    const map = hostPathMapper(named.docker)
    const mounts = [
      { type: 'bind' as const, source: '/data/broker/public', target: '/run/berth', readOnly: true },
      { type: 'volume' as const, source: 'berth-ws-1', target: '/workspace' },
    ]
    expect(await map(mounts)).toEqual([
      { type: 'bind', source: '/host/data/broker/public', target: '/run/berth', readOnly: true },
      { type: 'volume', source: 'berth-ws-1', target: '/workspace' },
    ])
    const asked = named.calls.length
    await map(mounts)
    expect(named.calls.length).toBe(asked)
    // Nothing to map: no question to the engine at all.
    expect(await hostPathMapper(docker)([{ type: 'volume', source: 'v', target: '/w' }])).toEqual([
      { type: 'volume', source: 'v', target: '/w' },
    ])
    expect(calls).toEqual([])
  })
})
