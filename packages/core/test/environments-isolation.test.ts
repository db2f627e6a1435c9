/**
 * An environment's isolation level: `container` by default, `gvisor` only where the runtime
 * gives it (a clear 400 otherwise), the operator's least raising every environment, and the
 * task's container spec carrying it (so no gVisor task lands in a runc warm container).
 */
import { createStorage } from 'unstorage'
import { describe, expect, it } from 'vitest'
import { unstorageStore } from '../../server/src/store.js'
import { DEFAULT_ENVIRONMENT_CAPS, silentLogger, systemClock, type EnvironmentCaps, type Isolation } from '@berth/core'
import { EnvironmentsService } from '../src/resources/environments.js'

function service(caps: Partial<EnvironmentCaps> = {}, levels?: readonly Isolation[]) {
  return new EnvironmentsService({
    store: unstorageStore(createStorage(), { cache: false }),
    clock: systemClock,
    logger: silentLogger,
    caps: { ...DEFAULT_ENVIRONMENT_CAPS, ...caps },
    isolations: levels && { runtime: 'docker', levels: async () => levels },
  })
}

describe('environment isolation', () => {
  it('defaults to container, shown in the view; the spec then says nothing of it', async () => {
    const envs = service({}, ['container'])
    const env = await envs.create('usr_1', { name: 'plain' })
    expect(env.isolation).toBe('container')
    expect((await envs.resolve('usr_1', env.id)).spec.isolation).toBeUndefined()
  })

  it('gvisor where the runtime gives it: kept on update, and in the container spec', async () => {
    const envs = service({}, ['container', 'gvisor'])
    const env = await envs.create('usr_1', { name: 'gv', isolation: 'gvisor' })
    expect(env.isolation).toBe('gvisor')
    expect((await envs.update('usr_1', env.id, { description: 'x' })).isolation).toBe('gvisor')
    expect((await envs.resolve('usr_1', env.id)).spec.isolation).toBe('gvisor')
    expect((await envs.update('usr_1', env.id, { isolation: 'container' })).isolation).toBe('container')
  })

  it('a runtime without gVisor: create and update are a 400 at isolation, naming the runtime', async () => {
    const envs = service({}, ['container'])
    await expect(envs.create('usr_1', { name: 'gv', isolation: 'gvisor' })).rejects.toMatchObject({
      status: 400,
      details: { issues: [expect.objectContaining({ path: 'isolation', message: expect.stringMatching(/docker/) })] },
    })
    const env = await envs.create('usr_1', { name: 'plain' })
    await expect(envs.update('usr_1', env.id, { isolation: 'gvisor' })).rejects.toMatchObject({ status: 400 })
    expect((await envs.get('usr_1', env.id)).isolation).toBe('container')
  })

  it("the operator's gvisor applies to every environment, older ones included; asking container is a 400", async () => {
    const store = unstorageStore(createStorage(), { cache: false })
    const make = (isolation: Isolation) =>
      new EnvironmentsService({
        store,
        clock: systemClock,
        logger: silentLogger,
        caps: { ...DEFAULT_ENVIRONMENT_CAPS, isolation },
        isolations: { runtime: 'docker', levels: async () => ['container', 'gvisor'] },
      })
    const before = await make('container').create('usr_1', { name: 'old' })
    const strict = make('gvisor')
    expect((await strict.get('usr_1', before.id)).isolation).toBe('gvisor')
    expect((await strict.resolve('usr_1', before.id)).spec.isolation).toBe('gvisor')
    expect((await strict.create('usr_1', { name: 'new' })).isolation).toBe('gvisor')
    await expect(strict.create('usr_1', { name: 'weak', isolation: 'container' })).rejects.toMatchObject({
      status: 400,
      details: { issues: [expect.objectContaining({ path: 'isolation' })] },
    })
  })
})
