/**
 * Secrets' delivery modes through the API (`env`, `brokered` with hosts), and what a run's
 * input holds with a credential broker: a capability token instead of the model key, the
 * placeholder of a brokered secret, and a redaction list without either value.
 */
import { RunTokens } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { materialize } from '../../core/src/tasks/materialize.js'
import { clientFor, failure, startServer, type TestServer } from './helpers.js'

const MODEL_KEY = 'sk-ant-api03-DELIVERYKEY-0a9s8d7f6g'
const BROKERED = 'brokered-DELIVERY-value-5h4j3k'
const ENV_VALUE = 'env-DELIVERY-value-2l1z0x'

let s: TestServer
let api: ReturnType<typeof clientFor>
let owner: string
let profileId: string
beforeAll(async () => {
  s = await startServer()
  const user = await s.user()
  owner = user.id
  api = clientFor(s, user.token)
  const key = await api.apiKeys.create({ body: { name: 'prod', provider: 'anthropic', key: MODEL_KEY } })
  profileId = (await api.profiles.create({ body: { name: 'P', slug: 'p', api_key_id: key.id } })).id
})
afterAll(() => s.close())

describe('secret delivery', () => {
  it('defaults to env, takes brokered with hosts, and says so without the value', async () => {
    const plain = await api.secrets.create({ body: { name: 'PLAIN', value: 'v1v1v1' } })
    expect(plain).toMatchObject({ delivery: 'env', hosts: [] })
    const brokered = await api.secrets.create({
      body: {
        name: 'BROKERED_ONE',
        value: 'v2v2v2',
        delivery: 'brokered',
        hosts: ['api.example.com', '*.example.org'],
      },
    })
    expect(brokered).toMatchObject({ delivery: 'brokered', hosts: ['api.example.com', '*.example.org'] })
    expect(JSON.stringify(brokered)).not.toContain('v2v2v2')
    // Back to env: the hosts go with it.
    const back = await api.secrets.update({ params: { id: brokered.id }, body: { delivery: 'env' } })
    expect(back).toMatchObject({ delivery: 'env', hosts: [] })
  })

  it('refuses a brokered secret without hosts, hosts on an env secret, and a malformed host, changing nothing', async () => {
    const before = (await api.secrets.list()).total
    const noHosts = await failure(
      api.secrets.create({ body: { name: 'NO_HOSTS', value: 'x1x1', delivery: 'brokered' } }),
    )
    expect(noHosts.status).toBe(400)
    expect((noHosts.details!.issues as { path: string }[])[0]).toMatchObject({ path: 'hosts' })
    const envHosts = await failure(
      api.secrets.create({ body: { name: 'ENV_HOSTS', value: 'x1x1', hosts: ['api.example.com'] } }),
    )
    expect(envHosts.status).toBe(400)
    for (const host of ['http://api.example.com', 'a b', '*.', 'api.example.com/path', '']) {
      const bad = await failure(
        api.secrets.create({ body: { name: 'BAD_HOST', value: 'x1x1', delivery: 'brokered', hosts: [host] } }),
      )
      expect(bad.status, host).toBe(400)
    }
    expect((await api.secrets.list()).total).toBe(before)
    // An update that would leave a brokered secret without hosts is refused too.
    const b = await api.secrets.create({
      body: { name: 'KEEP_HOSTS', value: 'x1x1', delivery: 'brokered', hosts: ['api.example.com'] },
    })
    expect((await failure(api.secrets.update({ params: { id: b.id }, body: { hosts: [] } }))).status).toBe(400)
    expect(await api.secrets.get({ params: { id: b.id } })).toMatchObject({ hosts: ['api.example.com'] })
  })
})

describe('a run input with a credential broker', () => {
  it('holds a capability token, placeholders and env values, never the model key or a brokered value', async () => {
    await api.secrets.create({ body: { name: 'ENV_ONE', value: ENV_VALUE, profile_ids: [profileId] } })
    const brokered = await api.secrets.create({
      body: {
        name: 'API_TOKEN',
        value: BROKERED,
        delivery: 'brokered',
        hosts: ['api.example.com'],
        profile_ids: [profileId],
      },
    })
    const tokens = new RunTokens(new Uint8Array(32).fill(7))
    const services = s.berth.services
    const profile = await services.profiles.records.get(owner, profileId)
    const ws = { id: 'ws_x', owner_id: owner, model_override: null, sdk_session_id: null } as never
    const task = {
      id: 'task_x',
      owner_id: owner,
      prompt: 'hi',
      allowed_tools: null,
      max_turns: null,
      max_budget_usd: null,
    }
    const deps = { ...services, cipher: undefined }
    const broker = {
      tokens,
      gateway_socket: '/run/berth/gateway.sock',
      proxy_socket: '/run/berth/proxy.sock',
      ca_file: '/run/berth/ca.pem',
    }
    const input = await materialize({ ...deps, broker }, task, profile, ws)
    expect(input.model).toMatchObject({ provider: 'anthropic', api_key: null, base_url: null })
    expect(input.broker).toMatchObject({
      gateway_socket: '/run/berth/gateway.sock',
      proxy_socket: '/run/berth/proxy.sock',
    })
    expect(tokens.subject(input.broker!.token)).toBe('task_x')
    expect(input.env).toMatchObject({ ENV_ONE: ENV_VALUE, API_TOKEN: `berth_brokered_${brokered.id}` })
    const whole = JSON.stringify(input)
    expect(whole).not.toContain(MODEL_KEY)
    expect(whole).not.toContain(BROKERED)
    expect(input.redact).toContain(ENV_VALUE)
    // Without a broker the key is in the input, as before (BERTH_BROKER=off); a brokered value still is not.
    const direct = await materialize(deps, task, profile, ws)
    expect(direct.model.api_key).toBe(MODEL_KEY)
    expect(direct.broker).toBeUndefined()
    expect(JSON.stringify(direct)).not.toContain(BROKERED)
  })

  it('tokens name their subject, and a changed subject, MAC or key opens nothing', () => {
    const tokens = new RunTokens(new Uint8Array(32).fill(1))
    const token = tokens.issue('task_abc')
    expect(tokens.subject(token)).toBe('task_abc')
    expect(tokens.subject(token.replace('task_abc', 'task_abd'))).toBeNull()
    expect(tokens.subject(`${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`)).toBeNull()
    expect(new RunTokens(new Uint8Array(32).fill(2)).subject(token)).toBeNull()
    expect(tokens.subject('sk-ant-anything')).toBeNull()
    expect(tokens.subject(RunTokens.warmSubject())).toBeNull()
  })
})
