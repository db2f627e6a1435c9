import Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { IDLE_COMMAND, collectExec } from '@berth/core'
import { readEngine } from '@berth/testkit'
import { DEFAULT_CAP_ADD, DEFAULT_LIMITS, toCreateOptions } from '../src/hardening.js'
import { dockerRuntime } from '../src/index.js'

const engine = readEngine('docker')
const raw = new Docker({ socketPath: engine.socketPath })
const rt = dockerRuntime({ socketPath: engine.socketPath })

/** Bit numbers of the kept capabilities (linux/capability.h). */
const CAP_BITS: Record<string, number> = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, KILL: 5, SETGID: 6, SETUID: 7 }

describe('toCreateOptions (no engine)', () => {
  it('hardens every container and merges limits over the defaults', () => {
    const body = toCreateOptions(
      { image: 'img', labels: { 'berth.owner': 'usr_1' }, limits: { pids: 50 }, env: { A: 'b' } },
      'berth-x',
    )
    expect(body.HostConfig).toMatchObject({
      Init: true,
      Privileged: false,
      CapDrop: ['ALL'],
      CapAdd: [...DEFAULT_CAP_ADD],
      SecurityOpt: ['no-new-privileges'],
      PidsLimit: 50,
      Memory: DEFAULT_LIMITS.memoryBytes,
      MemorySwap: DEFAULT_LIMITS.memoryBytes,
      NanoCpus: DEFAULT_LIMITS.cpus * 1e9,
      NetworkMode: 'bridge',
      PublishAllPorts: false,
      PortBindings: {},
    })
    expect(body.Labels).toEqual({ 'berth.owner': 'usr_1', 'berth.managed': 'true' })
    expect(body.Env).toEqual(['A=b'])
  })

  it('cannot be talked out of berth.managed by caller labels', () => {
    const body = toCreateOptions({ image: 'img', labels: { 'berth.managed': 'false' } }, 'n')
    expect(body.Labels?.['berth.managed']).toBe('true')
  })
})

describe('docker containers are hardened on the engine', () => {
  let id: string
  const src = `/tmp/berth-hardening-${process.pid}`

  beforeAll(async () => {
    const { mkdirSync, writeFileSync } = await import('node:fs')
    mkdirSync(src, { recursive: true })
    writeFileSync(`${src}/ro.txt`, 'read only\n')
    ;({ id } = await rt.create({
      image: engine.image,
      cmd: [...IDLE_COMMAND],
      labels: { 'berth.owner': 'usr_h', 'berth.workspace': 'ws_h', 'berth.pool': 'hardening' },
      mounts: [
        { type: 'bind', source: src, target: '/mnt/ro', readOnly: true },
        { type: 'volume', source: `berth-hardening-${process.pid}`, target: '/mnt/vol' },
      ],
    }))
    await rt.start(id)
  })

  afterAll(async () => {
    await rt.remove(id)
    await raw
      .getVolume(`berth-hardening-${process.pid}`)
      .remove()
      .catch(() => {})
    const { rmSync } = await import('node:fs')
    rmSync(src, { recursive: true, force: true })
  })

  it('sets the engine-side configuration', async () => {
    const info = await raw.getContainer(id).inspect()
    expect(info.HostConfig.Privileged).toBe(false)
    expect(info.HostConfig.Init).toBe(true)
    expect(info.HostConfig.CapDrop).toEqual(['ALL'])
    expect([...(info.HostConfig.CapAdd ?? [])].map((c) => c.replace(/^CAP_/, '')).sort()).toEqual(
      [...DEFAULT_CAP_ADD].sort(),
    )
    expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges')
    expect(info.HostConfig.PidsLimit).toBe(DEFAULT_LIMITS.pids)
    expect(info.HostConfig.Memory).toBe(DEFAULT_LIMITS.memoryBytes)
    expect(info.HostConfig.NanoCpus).toBe(DEFAULT_LIMITS.cpus * 1e9)
    expect(info.NetworkSettings.Ports ?? {}).toEqual({})
    expect(info.Config.Labels).toMatchObject({
      'berth.managed': 'true',
      'berth.owner': 'usr_h',
      'berth.workspace': 'ws_h',
      'berth.pool': 'hardening',
    })
  })

  it('runs with exactly the kept capabilities, no-new-privileges and an init as PID 1', async () => {
    const r = await collectExec(
      await rt.exec(id, {
        cmd: ['sh', '-c', 'grep -E "^(CapEff|CapBnd|NoNewPrivs)" /proc/self/status; cat /proc/1/comm'],
      }),
    )
    const expected = DEFAULT_CAP_ADD.reduce((mask, c) => mask | (1n << BigInt(CAP_BITS[c]!)), 0n)
    const field = (k: string) => new RegExp(`${k}:\\s+(\\S+)`).exec(r.stdout)?.[1]
    expect(BigInt(`0x${field('CapEff')}`)).toBe(expected)
    expect(BigInt(`0x${field('CapBnd')}`)).toBe(expected)
    expect(field('NoNewPrivs')).toBe('1')
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(/init/) // docker-init / podman-init / catatonit
  })

  it('denies what dropped capabilities guard (mknod) and keeps what the agent needs (chown)', async () => {
    const r = await collectExec(
      await rt.exec(id, {
        cmd: [
          'sh',
          '-c',
          'mknod /tmp/dev c 1 3 2>/dev/null && echo mknod-ok; touch /tmp/f && chown 1000:1000 /tmp/f && echo chown-ok',
        ],
      }),
    )
    expect(r.stdout).not.toContain('mknod-ok')
    expect(r.stdout).toContain('chown-ok')
  })

  it('mounts binds read-only when asked, and named volumes writable', async () => {
    const r = await collectExec(
      await rt.exec(id, {
        cmd: [
          'sh',
          '-c',
          'cat /mnt/ro/ro.txt; touch /mnt/ro/x 2>/dev/null && echo ro-writable; touch /mnt/vol/x && echo vol-ok',
        ],
      }),
    )
    expect(r.stdout).toContain('read only')
    expect(r.stdout).not.toContain('ro-writable')
    expect(r.stdout).toContain('vol-ok')
  })
})
