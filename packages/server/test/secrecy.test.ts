/**
 * Secret values, model keys and caller keys never appear in a response, a list or a log
 * line, and are not stored in plaintext on disk (fs driver).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { ADMIN_TOKEN, clientFor, failure, startServer, type TestServer } from './helpers.js'

const MODEL_KEY = 'sk-ant-api03-MODELKEYMARKER0123456789abcdef'
const SECRET_VALUE = 'secret-value-MARKER-9f8e7d6c5b4a'
const NEW_MODEL_KEY = 'sk-ant-api03-ROTATEDKEYMARKER-0000'
const NEW_SECRET_VALUE = 'rotated-secret-MARKER-1111'

let s: TestServer
let dataDir: string
const responses: string[] = []
let callerToken: string
let secondToken: string

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? files(p) : [p]
  })
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-secrecy-'))
  s = await startServer({ dataDir, storage: createStorage({ driver: fsDriver({ base: join(dataDir, 'store') }) }) })
  // Typed clients that keep the text of every answer.
  const admin = clientFor(s, ADMIN_TOKEN, responses)
  const created = await s.request('/admin/users', { method: 'POST', token: ADMIN_TOKEN, json: { name: 'Ada' } })
  const { user, key } = (await created.json()) as { user: { id: string }; key: { token: string } }
  callerToken = key.token
  const api = clientFor(s, callerToken, responses)
  secondToken = (await admin.admin.keys.create({ params: { id: user.id }, body: { name: 'ci' } })).token

  const apiKey = await api.apiKeys.create({ body: { name: 'prod', provider: 'anthropic', key: MODEL_KEY } })
  const profile = await api.profiles.create({ body: { name: 'P', slug: 'p', api_key_id: apiKey.id } })
  const secret = await api.secrets.create({
    body: { name: 'DEPLOY_TOKEN', value: SECRET_VALUE, profile_ids: [profile.id] },
  })
  // Rotate both, then read everything back every way there is.
  await api.apiKeys.update({ params: { id: apiKey.id }, body: { key: NEW_MODEL_KEY } })
  await api.secrets.update({ params: { id: secret.id }, body: { value: NEW_SECRET_VALUE } })
  await api.apiKeys.list()
  await api.apiKeys.get({ params: { id: apiKey.id } })
  await api.secrets.list()
  await api.secrets.get({ params: { id: secret.id } })
  await api.profiles.list()
  await api.profiles.get({ params: { id: profile.id } })
  await api.profiles.models({ params: { id: profile.id } })
  await admin.admin.users.list()
  // Validation errors echo nothing of a rejected secret either.
  const bad = await failure(api.secrets.create({ body: { name: 'bad name', value: SECRET_VALUE } }))
  expect(bad.status).toBe(400)
  // A request authenticated with the second key, and a ?token= query, for the logs.
  expect((await s.request('/v1/profiles', { token: secondToken })).status).toBe(200)
  await s.request(`/v1/profiles?token=${callerToken}`)
})
afterAll(async () => {
  await s.close()
  rmSync(dataDir, { recursive: true, force: true })
})

const markers = () => [MODEL_KEY, SECRET_VALUE, NEW_MODEL_KEY, NEW_SECRET_VALUE, callerToken, secondToken, ADMIN_TOKEN]

it('no response body contains a secret value, model key or caller key (beyond the one-time issue)', () => {
  // The responses that issued the keys are the only place they may appear: drop those.
  const rest = responses.filter((r) => !r.includes('"token"'))
  expect(rest.length).toBeGreaterThan(10)
  for (const m of markers()) for (const r of rest) expect(r).not.toContain(m)
  for (const m of markers().slice(0, 4)) for (const r of responses) expect(r).not.toContain(m)
})

it('secret and key responses say what is set without saying what it is', () => {
  const keys = responses.map((r) => JSON.parse(r)).find((b) => Array.isArray(b['api-keys']))
  expect(keys['api-keys'][0]).toMatchObject({ has_key: true, provider: 'anthropic' })
  const secrets = responses.map((r) => JSON.parse(r)).find((b) => Array.isArray(b.secrets))
  expect(Object.keys(secrets.secrets[0]).sort()).toEqual([
    'created_at',
    'delivery',
    'hosts',
    'id',
    'name',
    'profile_ids',
    'scope',
    'updated_at',
  ])
})

it('no log line contains them', () => {
  expect(s.logs.length).toBeGreaterThan(10)
  for (const m of markers()) for (const line of s.logs) expect(line).not.toContain(m)
})

it('nothing is stored in plaintext on disk, yet everything is recoverable', async () => {
  const all = files(dataDir)
  expect(all.length).toBeGreaterThan(5)
  for (const f of all) {
    const text = readFileSync(f, 'latin1')
    for (const m of markers()) expect(text.includes(m), `${m.slice(0, 12)}… in ${f}`).toBe(false)
  }
  // Encrypted, not dropped: the service decrypts what tasks will get.
  const owner = (await s.berth.services.users.authenticate(callerToken))!.id
  const [profile] = (await s.berth.services.profiles.list(owner, { page: 1, limit: 1 })).items
  expect(await s.berth.services.secrets.environment(owner, profile!.id)).toEqual({ DEPLOY_TOKEN: NEW_SECRET_VALUE })
  expect((await s.berth.services.apiKeys.resolve(owner, profile!.api_key_id)).key).toBe(NEW_MODEL_KEY)
})

it('caller keys are stored as SHA-256 hashes and still authenticate', async () => {
  const { createHash } = await import('node:crypto')
  const hash = createHash('sha256').update(callerToken).digest('hex')
  expect(files(dataDir).some((f) => f.includes(hash))).toBe(true)
  expect((await s.request('/v1/profiles', { token: callerToken })).status).toBe(200)
})
