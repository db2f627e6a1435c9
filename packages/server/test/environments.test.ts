/**
 * The environment resource over HTTP: owner scoping, the operator's caps (400 naming the
 * field, nothing changed), profiles referencing environments, and an environment whose
 * image failed refused at submit (on a real engine, where the image cannot be pulled).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { DEFAULT_ENVIRONMENT_CAPS } from '@berth/core'
import { startServer, type TestServer } from './helpers.js'
import { engineRuntime, uniquePoolName } from './pool.helpers.js'
import { taskServer, type Json } from './tasks.helpers.js'

describe('environments: caps and ownership', () => {
  let s: TestServer
  let alice: { token: string }
  let bob: { token: string }
  const call = async (who: { token: string }, method: string, path: string, json?: unknown) => {
    const res = await s.request(path, { method, token: who.token, ...(json !== undefined && { json }) })
    const text = await res.text()
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json }
  }

  beforeAll(async () => {
    s = await startServer({
      environments: {
        caps: { ...DEFAULT_ENVIRONMENT_CAPS, defaultPolicy: 'none', allowedPolicies: ['none', 'allowlist'], max: { cpus: 2, memory_mb: 1024, pids: 512, disk_mb: null } },
      },
    })
    alice = await s.user()
    bob = await s.user()
  })
  afterAll(() => s.close())

  it('creates with the operator default policy, and reads, lists, updates and deletes for its owner only', async () => {
    const created = await call(alice, 'POST', '/v1/environments', { name: 'py', packages: ['python3.11-minimal'], env: { PIP_INDEX_URL: 'https://pypi.org/simple' }, limits: { cpus: 1.5 } })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    expect(created.body).toMatchObject({ name: 'py', network: { policy: 'none', allow: [] }, limits: { cpus: 1.5, memory_mb: null }, env: { PIP_INDEX_URL: 'https://pypi.org/simple' } })
    expect(created.body.image_status.state).toMatch(/^(building|ready)$/)
    const id = created.body.id as string
    expect((await call(alice, 'GET', `/v1/environments/${id}`)).body.name).toBe('py')
    expect((await call(bob, 'GET', `/v1/environments/${id}`)).status).toBe(404)
    expect((await call(bob, 'PATCH', `/v1/environments/${id}`, { name: 'mine' })).status).toBe(404)
    expect((await call(bob, 'GET', '/v1/environments')).body.total).toBe(0)
    const patched = await call(alice, 'PATCH', `/v1/environments/${id}`, { network: { policy: 'allowlist', allow: [{ host: 'pypi.org', ports: [443] }] } })
    expect(patched.body.network).toEqual({ policy: 'allowlist', allow: [{ host: 'pypi.org', ports: [443] }] })
    expect(patched.body.limits.cpus).toBe(1.5)
    expect((await call(alice, 'DELETE', `/v1/environments/${id}`)).status).toBe(204)
    expect((await call(alice, 'GET', `/v1/environments/${id}`)).status).toBe(404)
  })

  it('refuses limits above the caps and policies not offered with a 400 naming the field, changing nothing', async () => {
    for (const [body, path] of [
      [{ name: 'big', limits: { cpus: 3 } }, 'limits.cpus'],
      [{ name: 'big', limits: { memory_mb: 4096 } }, 'limits.memory_mb'],
      [{ name: 'big', limits: { pids: 10_000 } }, 'limits.pids'],
      [{ name: 'open', network: { policy: 'public' } }, 'network.policy'],
      [{ name: 'root', run_as_root: true }, 'run_as_root'],
      // An allowlist cannot open what `public` refuses: the metadata address, private ranges, everything.
      [{ name: 'meta', network: { policy: 'allowlist', allow: [{ host: '169.254.169.254', ports: [80] }] } }, 'network.allow.0.host'],
      [{ name: 'lan', network: { policy: 'allowlist', allow: [{ host: 'pypi.org' }, { host: '10.20.0.0/16' }] } }, 'network.allow.1.host'],
      [{ name: 'all', network: { policy: 'allowlist', allow: [{ host: '0.0.0.0/0' }] } }, 'network.allow.0.host'],
      [{ name: 'ula', network: { policy: 'allowlist', allow: [{ host: 'fd00::1' }] } }, 'network.allow.0.host'],
    ] as const) {
      const res = await call(alice, 'POST', '/v1/environments', body)
      expect(res.status, JSON.stringify(body)).toBe(400)
      expect(res.body.code).toBe('VALIDATION_FAILED')
      expect(res.body.details.issues.map((i: Json) => i.path)).toContain(path)
    }
    const reserved = await call(alice, 'POST', '/v1/environments', { name: 'sneaky', env: { ANTHROPIC_BASE_URL: 'http://10.0.0.1' } })
    expect(reserved.status).toBe(400)
    expect(JSON.stringify(reserved.body.details)).toContain('ANTHROPIC_BASE_URL')
    const ok = await call(alice, 'POST', '/v1/environments', { name: 'small', limits: { cpus: 2, memory_mb: 1024 } })
    expect(ok.status).toBe(201)
    const raise = await call(alice, 'PATCH', `/v1/environments/${ok.body.id}`, { limits: { memory_mb: 2048 } })
    expect(raise.status).toBe(400)
    expect(raise.body.details.issues[0].path).toBe('limits.memory_mb')
    expect((await call(alice, 'GET', `/v1/environments/${ok.body.id}`)).body.limits.memory_mb).toBe(1024)
  })

  it('a profile names one of its owner\'s environments; another caller\'s is a 400', async () => {
    const env = await call(alice, 'POST', '/v1/environments', { name: 'shared?' })
    const keyOf = async (who: { token: string }) => (await call(who, 'POST', '/v1/api-keys', { name: 'k', provider: 'stub' })).body.id
    const bobKey = await keyOf(bob)
    const stolen = await call(bob, 'POST', '/v1/profiles', { name: 'B', slug: 'b', api_key_id: bobKey, environment_id: env.body.id })
    expect(stolen.status).toBe(400)
    expect(stolen.body.details.issues[0].path).toBe('environment_id')
    const own = await call(alice, 'POST', '/v1/profiles', { name: 'A', slug: 'a', api_key_id: await keyOf(alice), environment_id: env.body.id })
    expect(own.status).toBe(201)
    expect(own.body.environment_id).toBe(env.body.id)
    const bare = await call(bob, 'POST', '/v1/profiles', { name: 'B', slug: 'b2', api_key_id: bobKey })
    expect(bare.body.environment_id).toBeNull()
    const moved = await call(bob, 'PATCH', `/v1/profiles/${bare.body.id}`, { environment_id: env.body.id })
    expect(moved.status).toBe(400)
    // In use: not deleted (its profile would silently get the default's wider network).
    const inUse = await call(alice, 'DELETE', `/v1/environments/${env.body.id}`)
    expect(inUse.status).toBe(400)
    expect(inUse.body.error).toContain(own.body.id)
    expect((await call(alice, 'GET', `/v1/environments/${env.body.id}`)).status).toBe(200)
    await call(alice, 'PATCH', `/v1/profiles/${own.body.id}`, { environment_id: null })
    expect((await call(alice, 'DELETE', `/v1/environments/${env.body.id}`)).status).toBe(204)
  })
})

describe('environments: an image that fails is refused at submit (docker)', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  const { info } = engineRuntime('docker')

  beforeAll(async () => {
    t = await taskServer('docker', { min: 0, max: 2, berth: { pool: { image: info.image, min: 0, max: 2, name: uniquePoolName('env-img') } } })
  }, 60_000)
  afterAll(() => t?.s.close())

  it('shows building then failed with the log tail; a submit is a 400; fixing it makes it ready and runnable', async () => {
    const env = await t.call('POST', '/v1/environments', { name: 'missing', image: 'berth-no-such-image-e18:1' })
    expect(env.status).toBe(201)
    expect(env.body.image_status).toMatchObject({ ref: 'berth-no-such-image-e18:1', state: 'building' })
    const failed = await vi.waitFor(async () => {
      const r = (await t.call('GET', `/v1/environments/${env.body.id}`)).body
      if (r.image_status.state !== 'failed') throw new Error(r.image_status.state)
      return r
    }, 60_000)
    expect(failed.image_status.log_tail).toMatch(/berth-no-such-image-e18/)
    const profile = await t.call('POST', '/v1/profiles', { name: 'p', slug: 'img-p', api_key_id: t.keyId, environment_id: env.body.id })
    const sub = await t.call('POST', '/v1/tasks', { mode: 'batch', profile_id: profile.body.id, prompt: 'hi' })
    expect(sub.status).toBe(400)
    expect(sub.body.error).toMatch(/failed/)
    expect(sub.body.details.log_tail).toMatch(/berth-no-such-image-e18/)
    // Back to the operator's image: ready, and tasks run.
    const fixed = await t.call('PATCH', `/v1/environments/${env.body.id}`, { image: null })
    expect(fixed.body.image_status.ref).toBe(info.image)
    await vi.waitFor(async () => {
      if ((await t.call('GET', `/v1/environments/${env.body.id}`)).body.image_status.state !== 'ready') throw new Error('not ready')
    }, 30_000)
    const ok = await t.call('POST', '/v1/tasks', { mode: 'batch', profile_id: profile.body.id, prompt: 'Hello [[berth:text fine]]' })
    expect(ok.status).toBe(202)
    const done = await t.waitDone(ok.body.task_id)
    expect(done.status, JSON.stringify(done.error)).toBe('completed')
  }, 120_000)
})
