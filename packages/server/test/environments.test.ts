/**
 * The environment resource over HTTP: owner scoping, the operator's caps (400 naming the
 * field, nothing changed), profiles referencing environments, and an environment whose
 * image failed refused at submit (on a real engine, where the image cannot be pulled).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { DEFAULT_ENVIRONMENT_CAPS } from '@berth/core'
import type { BerthClient } from '@berth/client'
import { clientFor, failure, startServer, type TestServer } from './helpers.js'
import { engineRuntime, uniquePoolName } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

describe('environments: caps and ownership', () => {
  let s: TestServer
  let alice: BerthClient
  let bob: BerthClient
  let aliceToken: string

  beforeAll(async () => {
    s = await startServer({
      environments: {
        caps: {
          ...DEFAULT_ENVIRONMENT_CAPS,
          defaultPolicy: 'none',
          allowedPolicies: ['none', 'allowlist'],
          max: { cpus: 2, memory_mb: 1024, pids: 512, disk_mb: null },
        },
      },
    })
    aliceToken = (await s.user()).token
    alice = clientFor(s, aliceToken)
    bob = clientFor(s, (await s.user()).token)
  })
  afterAll(() => s.close())

  it('creates with the operator default policy, and reads, lists, updates and deletes for its owner only', async () => {
    const created = await alice.environments.create({
      body: {
        name: 'py',
        packages: ['python3.11-minimal'],
        env: { PIP_INDEX_URL: 'https://pypi.org/simple' },
        limits: { cpus: 1.5 },
      },
    })
    expect(created).toMatchObject({
      name: 'py',
      network: { policy: 'none', allow: [] },
      limits: { cpus: 1.5, memory_mb: null },
      env: { PIP_INDEX_URL: 'https://pypi.org/simple' },
    })
    expect(created.image_status.state).toMatch(/^(building|ready)$/)
    const id = created.id
    expect((await alice.environments.get({ params: { id } })).name).toBe('py')
    expect((await failure(bob.environments.get({ params: { id } }))).status).toBe(404)
    expect((await failure(bob.environments.update({ params: { id }, body: { name: 'mine' } }))).status).toBe(404)
    expect((await bob.environments.list()).total).toBe(0)
    const patched = await alice.environments.update({
      params: { id },
      body: { network: { policy: 'allowlist', allow: [{ host: 'pypi.org', ports: [443] }] } },
    })
    expect(patched.network).toEqual({ policy: 'allowlist', allow: [{ host: 'pypi.org', ports: [443] }] })
    expect(patched.limits.cpus).toBe(1.5)
    await alice.environments.delete({ params: { id } })
    expect((await failure(alice.environments.get({ params: { id } }))).status).toBe(404)
  })

  it('refuses limits above the caps and policies not offered with a 400 naming the field, changing nothing', async () => {
    for (const [body, path] of [
      [{ name: 'big', limits: { cpus: 3 } }, 'limits.cpus'],
      [{ name: 'big', limits: { memory_mb: 4096 } }, 'limits.memory_mb'],
      [{ name: 'big', limits: { pids: 10_000 } }, 'limits.pids'],
      [{ name: 'open', network: { policy: 'public' } }, 'network.policy'],
      [{ name: 'root', run_as_root: true }, 'run_as_root'],
      // An allowlist cannot open what `public` refuses: the metadata address, private ranges, everything.
      [
        { name: 'meta', network: { policy: 'allowlist', allow: [{ host: '169.254.169.254', ports: [80] }] } },
        'network.allow.0.host',
      ],
      [
        { name: 'lan', network: { policy: 'allowlist', allow: [{ host: 'pypi.org' }, { host: '10.20.0.0/16' }] } },
        'network.allow.1.host',
      ],
      [{ name: 'all', network: { policy: 'allowlist', allow: [{ host: '0.0.0.0/0' }] } }, 'network.allow.0.host'],
      [{ name: 'ula', network: { policy: 'allowlist', allow: [{ host: 'fd00::1' }] } }, 'network.allow.0.host'],
    ] as const) {
      // Raw: some of these bodies are outside what the client's types let a caller write.
      const res = await s.request('/v1/environments', { method: 'POST', token: aliceToken, json: body })
      expect(res.status, JSON.stringify(body)).toBe(400)
      const refused = (await res.json()) as { code: string; details: { issues: { path: string }[] } }
      expect(refused.code).toBe('VALIDATION_FAILED')
      expect(refused.details.issues.map((i) => i.path)).toContain(path)
    }
    const reserved = await failure(
      alice.environments.create({ body: { name: 'sneaky', env: { ANTHROPIC_BASE_URL: 'http://10.0.0.1' } } }),
    )
    expect(reserved.status).toBe(400)
    expect(JSON.stringify(reserved.details)).toContain('ANTHROPIC_BASE_URL')
    const ok = await alice.environments.create({ body: { name: 'small', limits: { cpus: 2, memory_mb: 1024 } } })
    const raise = await failure(
      alice.environments.update({ params: { id: ok.id }, body: { limits: { memory_mb: 2048 } } }),
    )
    expect(raise.status).toBe(400)
    expect((raise.details!.issues as { path: string }[])[0]!.path).toBe('limits.memory_mb')
    expect((await alice.environments.get({ params: { id: ok.id } })).limits.memory_mb).toBe(1024)
  })

  it("a profile names one of its owner's environments; another caller's is a 400", async () => {
    const env = await alice.environments.create({ body: { name: 'shared?' } })
    const keyOf = async (who: BerthClient) => (await who.apiKeys.create({ body: { name: 'k', provider: 'stub' } })).id
    const bobKey = await keyOf(bob)
    const stolen = await failure(
      bob.profiles.create({ body: { name: 'B', slug: 'b', api_key_id: bobKey, environment_id: env.id } }),
    )
    expect(stolen.status).toBe(400)
    expect((stolen.details!.issues as { path: string }[])[0]!.path).toBe('environment_id')
    const own = await alice.profiles.create({
      body: { name: 'A', slug: 'a', api_key_id: await keyOf(alice), environment_id: env.id },
    })
    expect(own.environment_id).toBe(env.id)
    const bare = await bob.profiles.create({ body: { name: 'B', slug: 'b2', api_key_id: bobKey } })
    expect(bare.environment_id).toBeNull()
    const moved = await failure(bob.profiles.update({ params: { id: bare.id }, body: { environment_id: env.id } }))
    expect(moved.status).toBe(400)
    // In use: not deleted (its profile would silently get the default's wider network).
    const inUse = await failure(alice.environments.delete({ params: { id: env.id } }))
    expect(inUse.status).toBe(400)
    expect(inUse.message).toContain(own.id)
    await alice.environments.get({ params: { id: env.id } })
    await alice.profiles.update({ params: { id: own.id }, body: { environment_id: null } })
    await alice.environments.delete({ params: { id: env.id } })
    expect((await failure(alice.environments.get({ params: { id: env.id } }))).status).toBe(404)
  })
})

describe('environments: an image that fails is refused at submit (docker)', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  const { info } = engineRuntime('docker')

  beforeAll(async () => {
    t = await taskServer('docker', {
      min: 0,
      max: 2,
      berth: { pool: { image: info.image, min: 0, max: 2, name: uniquePoolName('env-img') } },
    })
  }, 60_000)
  afterAll(() => t?.s.close())

  it('shows building then failed with the log tail; a submit is a 400; fixing it makes it ready and runnable', async () => {
    const env = await t.api.environments.create({ body: { name: 'missing', image: 'berth-no-such-image-e18:1' } })
    expect(env.image_status).toMatchObject({ ref: 'berth-no-such-image-e18:1', state: 'building' })
    const imageState = (state: string) =>
      vi.waitFor(async () => {
        const r = await t.api.environments.get({ params: { id: env.id } })
        expect(r.image_status.state).toBe(state)
        return r
      }, 60_000)
    const failed = await imageState('failed')
    expect(failed.image_status.log_tail).toMatch(/berth-no-such-image-e18/)
    const profile = await t.api.profiles.create({
      body: { name: 'p', slug: 'img-p', api_key_id: t.keyId, environment_id: env.id },
    })
    const sub = await failure(t.submit({ profile_id: profile.id, prompt: 'hi' }))
    expect(sub.status).toBe(400)
    expect(sub.message).toMatch(/failed/)
    expect(sub.details?.log_tail).toMatch(/berth-no-such-image-e18/)
    // Back to the operator's image: ready, and tasks run.
    const fixed = await t.api.environments.update({ params: { id: env.id }, body: { image: null } })
    expect(fixed.image_status.ref).toBe(info.image)
    await imageState('ready')
    const ok = await t.submit({ profile_id: profile.id, prompt: 'Hello [[berth:text fine]]' })
    const done = await t.waitDone(ok.task_id)
    expect(done.status, JSON.stringify(done.error)).toBe('completed')
  }, 120_000)
})
