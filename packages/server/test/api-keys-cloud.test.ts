/**
 * Bedrock and Vertex AI model credentials through `/v1/api-keys`: what each provider needs
 * and refuses (400 naming the field, nothing stored), the service account key as an object
 * or its JSON text, `token_uri` under the address policy, rotation, the model ids each
 * credential maps to, and a profile on one: its models, and the task refused without a
 * broker.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clientFor, failure, startServer, waitForTask, type TestServer } from './helpers.js'
import { sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

const PEM = generateKeyPairSync('rsa', { modulusLength: 2048 })
  .privateKey.export({ type: 'pkcs8', format: 'pem' })
  .toString()
const account = {
  type: 'service_account' as const,
  project_id: 'berth-keys-test',
  private_key_id: randomBytes(20).toString('hex'),
  private_key: PEM,
  client_email: 'agent@berth-keys-test.iam.gserviceaccount.com',
}
const aws = {
  aws_access_key_id: 'AKIAIOSFODNN7EXAMPLE',
  aws_secret_access_key: randomBytes(30).toString('base64'),
  aws_region: 'eu-central-1',
}

const baseDir = mkdtempSync(join(tmpdir(), 'berth-keys-cloud-'))
const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'none' })
const pool = uniquePoolName('keys-cloud')
let s: TestServer
let api: ReturnType<typeof clientFor>

beforeAll(async () => {
  // With the broker off (BERTH_BROKER=off), tasks on these credentials are refused.
  s = await startServer({
    runtime,
    pool: { image: 'local', min: 0, max: 1, name: pool },
    runner: { bundleDir: RUNNER_BUNDLE },
    broker: false,
  })
  await s.berth.ready
  api = clientFor(s, (await s.user()).token)
})
afterAll(async () => {
  await s?.close()
  await sweep(runtime, pool)
  rmSync(baseDir, { recursive: true, force: true })
})

/** The fields a 400 names. */
const named = async (call: Promise<unknown>) => {
  const err = await failure(call)
  expect(err.status).toBe(400)
  expect(err.code).toBe('VALIDATION_FAILED')
  return (err.details as { issues: { path: string }[] }).issues.map((i) => i.path)
}

describe('Bedrock credentials', () => {
  it('need an access key, its secret and a region; take a session token; refuse other providers’ fields', async () => {
    const before = (await api.apiKeys.list()).total
    expect(await named(api.apiKeys.create({ body: { name: 'aws', provider: 'bedrock' } }))).toEqual([
      'aws_access_key_id',
      'aws_secret_access_key',
      'aws_region',
    ])
    expect(
      await named(api.apiKeys.create({ body: { name: 'aws', provider: 'bedrock', ...aws, key: 'sk-ant-x' } })),
    ).toEqual(['key'])
    expect(
      await named(api.apiKeys.create({ body: { name: 'aws', provider: 'bedrock', ...aws, gcp_region: 'us-east5' } })),
    ).toEqual(['gcp_region'])
    expect(
      await named(api.apiKeys.create({ body: { name: 'aws', provider: 'bedrock', ...aws, aws_region: 'mars' } })),
    ).toEqual(['aws_region'])
    expect(
      await named(api.apiKeys.create({ body: { name: 'a', provider: 'anthropic', key: 'k', model_map: { x: 'y' } } })),
    ).toEqual(['model_map'])
    expect((await api.apiKeys.list()).total).toBe(before)

    const key = await api.apiKeys.create({
      body: { name: 'aws', provider: 'bedrock', ...aws, aws_session_token: 'FwoGZXIvYXdzEXAMPLE' },
    })
    expect(key).toMatchObject({
      provider: 'bedrock',
      has_key: true,
      has_session_token: true,
      aws_access_key_id: aws.aws_access_key_id,
      aws_region: 'eu-central-1',
      gcp_project_id: null,
      model_map: null,
    })
  })

  it('rotate: a new access key id needs its secret; the session token can be cleared', async () => {
    const key = await api.apiKeys.create({
      body: { name: 'aws', provider: 'bedrock', ...aws, aws_session_token: 'tok' },
    })
    expect(
      await named(api.apiKeys.update({ params: { id: key.id }, body: { aws_access_key_id: 'AKIAIOSFODNN7OTHER00' } })),
    ).toEqual(['aws_secret_access_key'])
    const rotated = await api.apiKeys.update({
      params: { id: key.id },
      body: { aws_access_key_id: 'AKIAIOSFODNN7OTHER00', aws_secret_access_key: 'new-secret', aws_session_token: null },
    })
    expect(rotated).toMatchObject({ aws_access_key_id: 'AKIAIOSFODNN7OTHER00', has_session_token: false })
    expect(await named(api.apiKeys.update({ params: { id: key.id }, body: { gcp_region: 'us-east5' } }))).toEqual([
      'gcp_region',
    ])
  })

  it('map the profile’s model ids to the region’s inference profiles, or to the credential’s own', async () => {
    const key = await api.apiKeys.create({
      body: {
        name: 'aws',
        provider: 'bedrock',
        ...aws,
        model_map: {
          'claude-haiku-4-5': 'arn:aws:bedrock:eu-central-1:123456789012:application-inference-profile/abc',
        },
      },
    })
    const profile = await api.profiles.create({ body: { name: 'P', slug: 'bedrock-p', api_key_id: key.id } })
    const models = Object.fromEntries(
      (await api.profiles.models({ params: { id: profile.id } })).models.map((m) => [m.id, m.provider_model_id]),
    )
    expect(models['claude-sonnet-4-5']).toBe('eu.anthropic.claude-sonnet-4-5-20250929-v1:0')
    expect(models['claude-opus-4-1']).toBe('eu.anthropic.claude-opus-4-1-20250805-v1:0')
    expect(models['claude-haiku-4-5']).toBe(
      'arn:aws:bedrock:eu-central-1:123456789012:application-inference-profile/abc',
    )
  })
})

describe('Vertex AI credentials', () => {
  it('take the service account key as an object or as its JSON text, and its project unless told another', async () => {
    const asObject = await api.apiKeys.create({
      body: { name: 'gcp', provider: 'vertex', gcp_service_account: account, gcp_region: 'us-east5' },
    })
    expect(asObject).toMatchObject({
      provider: 'vertex',
      has_key: true,
      gcp_client_email: account.client_email,
      gcp_project_id: 'berth-keys-test',
      gcp_region: 'us-east5',
      aws_region: null,
    })
    const asText = await api.apiKeys.create({
      body: {
        name: 'gcp',
        provider: 'vertex',
        gcp_service_account: JSON.stringify(account),
        gcp_project_id: 'another-project',
        gcp_region: 'global',
      },
    })
    expect(asText).toMatchObject({ gcp_project_id: 'another-project', gcp_region: 'global' })
    const profile = await api.profiles.create({ body: { name: 'P', slug: 'vertex-p', api_key_id: asText.id } })
    const sonnet = (await api.profiles.models({ params: { id: profile.id } })).models.find(
      (m) => m.id === 'claude-sonnet-4-5',
    )
    expect(sonnet?.provider_model_id).toBe('claude-sonnet-4-5@20250929')
  })

  it('refuse a key that is not a service account key, or whose private key cannot be read, naming the field', async () => {
    const base = { name: 'gcp', provider: 'vertex' as const, gcp_region: 'us-east5' }
    expect(await named(api.apiKeys.create({ body: { ...base } }))).toEqual(['gcp_service_account'])
    expect(await named(api.apiKeys.create({ body: { ...base, gcp_service_account: '{not json' } }))).toEqual([
      'gcp_service_account',
    ])
    expect(
      await named(
        api.apiKeys.create({
          body: { ...base, gcp_service_account: { ...account, type: 'authorized_user' as never } },
        }),
      ),
    ).toEqual(['gcp_service_account'])
    expect(
      await named(
        api.apiKeys.create({
          body: { ...base, gcp_service_account: JSON.stringify({ ...account, type: 'authorized_user' }) },
        }),
      ),
    ).toEqual(['gcp_service_account.type'])
    const broken = PEM.replace(/\n[A-Za-z0-9+/]{20}/, '\nAAAAAAAAAAAAAAAAAAAA')
    expect(
      await named(api.apiKeys.create({ body: { ...base, gcp_service_account: { ...account, private_key: broken } } })),
    ).toEqual(['gcp_service_account.private_key'])
    const { project_id: _project, ...noProject } = account
    expect(await named(api.apiKeys.create({ body: { ...base, gcp_service_account: noProject } }))).toEqual([
      'gcp_project_id',
    ])
  })

  it('hold its token_uri to the address policy, as base_url', async () => {
    const paths = await named(
      api.apiKeys.create({
        body: {
          name: 'gcp',
          provider: 'vertex',
          gcp_region: 'us-east5',
          gcp_service_account: { ...account, token_uri: 'http://127.0.0.1:9/token' },
        },
      }),
    )
    expect(paths).toEqual(['gcp_service_account.token_uri'])
  })
})

it('a task on a Bedrock or Vertex credential without the broker fails with MODEL_ERROR, naming why', async () => {
  const key = await api.apiKeys.create({ body: { name: 'aws', provider: 'bedrock', ...aws } })
  const profile = await api.profiles.create({ body: { name: 'P', slug: 'no-broker', api_key_id: key.id } })
  const submitted = await api.tasks.submit({ body: { mode: 'batch', profile_id: profile.id, prompt: 'hi' } })
  const task = await waitForTask(api, submitted.task_id, { timeout: 30_000 })
  expect(task.status).toBe('failed')
  expect(task.error).toMatchObject({ code: 'MODEL_ERROR', error: expect.stringContaining('credential broker') })
})
