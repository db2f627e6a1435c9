/**
 * Secret values, model keys (Anthropic keys, AWS secret access keys and session tokens,
 * service account keys) and caller keys never appear in a response, a list or a log line,
 * and are not stored in plaintext on disk (fs driver).
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto'
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
const AWS_SECRET = `aws-secret-MARKER-${randomBytes(12).toString('hex')}`
const AWS_SESSION = `aws-session-MARKER-${randomBytes(24).toString('hex')}`
const NEW_AWS_SECRET = `aws-rotated-MARKER-${randomBytes(12).toString('hex')}`
/** A service account's private key, and a line of it (the key's own bytes) to look for. */
const SA_PEM = generateKeyPairSync('rsa', { modulusLength: 2048 })
  .privateKey.export({ type: 'pkcs8', format: 'pem' })
  .toString()
const SA_LINE = SA_PEM.split('\n')[5]!
const serviceAccount = {
  type: 'service_account' as const,
  project_id: 'berth-secrecy',
  private_key_id: randomBytes(20).toString('hex'),
  private_key: SA_PEM,
  client_email: 'agent@berth-secrecy.iam.gserviceaccount.com',
}

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
  const bedrock = await api.apiKeys.create({
    body: {
      name: 'aws',
      provider: 'bedrock',
      aws_access_key_id: 'AKIAEXAMPLEMARKER0001',
      aws_secret_access_key: AWS_SECRET,
      aws_session_token: AWS_SESSION,
      aws_region: 'eu-west-1',
    },
  })
  // The service account key as the text of its JSON file.
  const vertex = await api.apiKeys.create({
    body: {
      name: 'gcp',
      provider: 'vertex',
      gcp_service_account: JSON.stringify(serviceAccount),
      gcp_region: 'europe-west1',
    },
  })
  // Invalid bodies echo nothing of a rejected secret either.
  const badAws = await failure(
    api.apiKeys.create({
      body: { name: 'aws', provider: 'bedrock', aws_secret_access_key: AWS_SECRET, aws_region: 'x' },
    }),
  )
  expect(badAws.status).toBe(400)
  const badSa = await failure(
    api.apiKeys.create({
      body: {
        name: 'gcp',
        provider: 'vertex',
        gcp_service_account: { ...serviceAccount, type: 'user' as never },
        gcp_region: 'us-east5',
      },
    }),
  )
  expect(badSa.status).toBe(400)
  // Rotate them all, then read everything back every way there is.
  await api.apiKeys.update({ params: { id: bedrock.id }, body: { aws_secret_access_key: NEW_AWS_SECRET } })
  await api.apiKeys.get({ params: { id: vertex.id } })
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

const markers = () => [
  MODEL_KEY,
  SECRET_VALUE,
  NEW_MODEL_KEY,
  NEW_SECRET_VALUE,
  AWS_SECRET,
  AWS_SESSION,
  NEW_AWS_SECRET,
  SA_LINE,
  callerToken,
  secondToken,
  ADMIN_TOKEN,
]
/** The markers that never appear in a response, even the one that issued them. */
const neverAnswered = () => markers().slice(0, 8)

it('no response body contains a secret value, model key or caller key (beyond the one-time issue)', () => {
  // The responses that issued the keys are the only place they may appear: drop those.
  const rest = responses.filter((r) => !r.includes('"token"'))
  expect(rest.length).toBeGreaterThan(10)
  for (const m of markers()) for (const r of rest) expect(r).not.toContain(m)
  for (const m of neverAnswered()) for (const r of responses) expect(r).not.toContain(m)
})

it('secret and key responses say what is set without saying what it is', () => {
  const keys = responses.map((r) => JSON.parse(r)).find((b) => Array.isArray(b['api-keys']))
  expect(keys['api-keys'].find((k: { provider: string }) => k.provider === 'anthropic')).toMatchObject({
    has_key: true,
  })
  const cloud = responses.map((r) => JSON.parse(r)).filter((b) => b.provider === 'bedrock' || b.provider === 'vertex')
  expect(cloud.find((b) => b.provider === 'bedrock')).toMatchObject({
    has_key: true,
    has_session_token: true,
    aws_access_key_id: 'AKIAEXAMPLEMARKER0001',
  })
  expect(cloud.find((b) => b.provider === 'vertex')).toMatchObject({
    has_key: true,
    gcp_client_email: serviceAccount.client_email,
    gcp_project_id: 'berth-secrecy',
  })
  for (const b of cloud)
    for (const field of ['aws_secret_access_key', 'aws_session_token', 'gcp_service_account', 'key'])
      expect(b).not.toHaveProperty(field)
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
  expect(await s.berth.services.secrets.forTask(owner, profile!.id)).toEqual([
    { name: 'DEPLOY_TOKEN', delivery: 'env', value: NEW_SECRET_VALUE },
  ])
  expect((await s.berth.services.apiKeys.resolve(owner, profile!.api_key_id)).key).toBe(NEW_MODEL_KEY)
  const cloud = (await s.berth.services.apiKeys.list(owner, { page: 1, limit: 10 })).items.filter(
    (k) => k.provider !== 'anthropic',
  )
  const resolved = await Promise.all(cloud.map((k) => s.berth.services.apiKeys.resolve(owner, k.id)))
  expect(resolved.find((c) => c.bedrock)?.bedrock).toMatchObject({
    secret_access_key: NEW_AWS_SECRET,
    session_token: AWS_SESSION,
  })
  expect(resolved.find((c) => c.vertex)?.vertex?.service_account.private_key).toBe(SA_PEM)
  // Neither reaches a runner: their `key` is null.
  expect(resolved.map((c) => c.key)).toEqual([null, null])
})

it('caller keys are stored as SHA-256 hashes and still authenticate', async () => {
  const { createHash } = await import('node:crypto')
  const hash = createHash('sha256').update(callerToken).digest('hex')
  expect(files(dataDir).some((f) => f.includes(hash))).toBe(true)
  expect((await s.request('/v1/profiles', { token: callerToken })).status).toBe(200)
})
