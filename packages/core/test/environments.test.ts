/**
 * What a task's container is made of, from its profile's environment: the network the
 * runtime must enforce (an allowlist always lets the model endpoint through), the limits,
 * the image, and never a silent fallback to the default.
 */
import { createStorage } from 'unstorage'
import { describe, expect, it } from 'vitest'
import { unstorageStore } from '../../server/src/store.js'
import {
  DEFAULT_ENVIRONMENT_CAPS,
  silentLogger,
  systemClock,
  touchesPrivateRange,
  type EnvironmentCaps,
} from '@berth/core'
import { EnvironmentsService } from '../src/resources/environments.js'

function service(caps: Partial<EnvironmentCaps> = {}) {
  const store = unstorageStore(createStorage(), { cache: false })
  return new EnvironmentsService({
    store,
    clock: systemClock,
    logger: silentLogger,
    caps: { ...DEFAULT_ENVIRONMENT_CAPS, ...caps },
  })
}

describe('EnvironmentsService.resolve', () => {
  it('an allowlist gets the model endpoint and MCP hosts added; limits fall back to the defaults field by field', async () => {
    const envs = service()
    const env = await envs.create('usr_1', {
      name: 'py',
      network: { policy: 'allowlist', allow: [{ host: 'pypi.org', ports: [443] }] },
      limits: { memory_mb: 512 },
    })
    const r = await envs.resolve('usr_1', env.id, ['api.anthropic.com', 'mcp.example.com'])
    expect(r.network).toEqual({
      policy: 'allowlist',
      allow: [{ host: 'pypi.org', ports: [443] }, { host: 'api.anthropic.com' }, { host: 'mcp.example.com' }],
    })
    expect(r.spec.egress).toEqual(r.network)
    expect(r.spec.limits).toEqual({
      cpus: 2,
      memoryBytes: 512 * 1024 * 1024,
      pids: 1024,
      diskBytes: 4096 * 1024 * 1024,
      tmpBytes: 512 * 1024 * 1024,
    })
    expect(r.spec.labels).toEqual({ 'berth.environment': env.id })
  })

  it("an environment's disk_mb sizes the workspace disk, over the operator's default", async () => {
    const envs = service({ defaults: { cpus: 1, memory_mb: 256, pids: 64, disk_mb: 100, tmp_mb: 32 } })
    const small = await envs.create('usr_1', { name: 'small', limits: { disk_mb: 64 } })
    expect((await envs.resolve('usr_1', small.id)).spec.limits).toMatchObject({
      diskBytes: 64 * 1024 * 1024,
      tmpBytes: 32 * 1024 * 1024,
    })
    const plain = await envs.create('usr_1', { name: 'plain' })
    expect((await envs.resolve('usr_1', plain.id)).spec.limits).toMatchObject({ diskBytes: 100 * 1024 * 1024 })
    await expect(envs.create('usr_1', { name: 'big', limits: { disk_mb: 30_000 } })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    })
  })

  it('public and none add nothing; the default environment is served warm unless its policy is an allowlist', async () => {
    const envs = service()
    const none = await envs.create('usr_1', { name: 'offline', network: { policy: 'none' } })
    expect((await envs.resolve('usr_1', none.id, ['api.anthropic.com'])).network).toEqual({ policy: 'none' })
    expect(await envs.resolve('usr_1', null, ['api.anthropic.com'])).toEqual({
      id: null,
      network: { policy: 'public' },
      spec: {},
    })
    const strict = service({ defaultPolicy: 'allowlist' })
    const d = await strict.resolve('usr_1', null, ['api.anthropic.com'])
    expect(d.spec.egress).toEqual({ policy: 'allowlist', allow: [{ host: 'api.anthropic.com' }] })
  })

  it('root only where the operator allows it', async () => {
    await expect(service().create('usr_1', { name: 'r', run_as_root: true })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    })
    const envs = service({ allowRoot: true })
    const env = await envs.create('usr_1', { name: 'r', run_as_root: true })
    expect((await envs.resolve('usr_1', env.id)).spec.user).toBe('0:0')
    const plain = await envs.create('usr_1', { name: 'p' })
    expect((await envs.resolve('usr_1', plain.id)).spec.user).toBeUndefined()
  })

  it("another owner's or a vanished environment is never replaced by the default", async () => {
    const envs = service()
    const env = await envs.create('usr_1', { name: 'x', network: { policy: 'none' } })
    await expect(envs.resolve('usr_2', env.id)).rejects.toMatchObject({ code: 'CONTAINER_FAILED' })
  })
})

describe('touchesPrivateRange', () => {
  it('catches every spelling that reaches a private range, and only those', () => {
    for (const x of [
      '169.254.169.254',
      '10.1.2.3',
      '0.0.0.0/0',
      '172.16.0.0/12',
      '192.168.1.0/24',
      '100.64.0.1',
      '127.0.0.1',
      '172.0.0.0/8',
      'fd00::1',
      'fe80::1',
      '::ffff:10.0.0.1',
      '::/0',
    ]) {
      expect({ x, hit: touchesPrivateRange(x) }).toEqual({ x, hit: true })
    }
    for (const x of ['203.0.113.7', '192.0.2.2', '8.8.8.0/24', '2606:4700::1111'])
      expect({ x, hit: touchesPrivateRange(x) }).toEqual({ x, hit: false })
  })
})
