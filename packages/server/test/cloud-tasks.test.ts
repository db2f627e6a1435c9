/**
 * Tasks on Bedrock and Vertex AI credentials, end to end on `local` under bubblewrap: the
 * real runner starts Claude Code with `CLAUDE_CODE_USE_BEDROCK` / `CLAUDE_CODE_USE_VERTEX`
 * pointed at the broker's gateway, which signs (SigV4) or authorizes (a token minted from
 * the service account's key) every call to a local fake of the provider that checks it.
 * A task completes through each, metered by provider; while it runs, neither the AWS
 * secret, the session token, the service account's key nor a minted token is anywhere the
 * agent can read. A dear call is cut at the task's budget (BUDGET_EXCEEDED) in each
 * provider's framing. A wrong secret, a key the token endpoint refuses and tokens that are
 * expired when issued each end the task with MODEL_ERROR.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { collectExec, silentLogger, type Task } from '@berth/core'
import { startFakeBedrock, startFakeVertex, type FakeBedrock, type FakeVertex } from '@berth/testkit/providers'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { endSleep, forms, hostSearch, SEARCH, type SearchAnswer } from './broker-search.helpers.js'
import { ADMIN_TOKEN, clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { onEngine, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

const AWS = {
  accessKeyId: `AKIA${randomBytes(8).toString('hex').toUpperCase()}`,
  secretAccessKey: randomBytes(30).toString('base64'),
  sessionToken: `IQoJb3JpZ2luX2Vj${randomBytes(60).toString('base64')}`,
}
const PROJECT = 'berth-cloud-tasks'
const REGION = 'us-east5'
const EMAIL = `agent@${PROJECT}.iam.gserviceaccount.com`
/** A million input tokens ($3) and 100,000 output tokens ($1.50) on Sonnet 4.5, streamed slowly. */
const DEAR = '[[berth:usage input=1000000 output=100000]] [[berth:slow 3000]]'
const DEAR_CALL = 4.5
const BUDGET = 0.5
/** An `env` secret's value: in the sandbox by design, so the search must find it. */
const VISIBLE = `visible-${randomBytes(12).toString('hex')}`

/** Its Bash call sleeps until the search is done: `sleep <seconds>`, a number nothing else uses. */
const searchedPrompt = (seconds: number) =>
  `Look around. [[berth:tool Bash {"command":"env > /workspace/env.txt; sleep ${seconds}"}]] [[berth:text Looked around.]]`

describe('Bedrock and Vertex AI credentials on local (bwrap)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-cloud-tasks-'))
  const pool = uniquePoolName('cloud')
  const runtime = localRuntime({ baseDir: join(dir, 'local'), logger: silentLogger, sandbox: 'bwrap' })
  const keys = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const privateKey = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  let bedrock: FakeBedrock
  let vertex: FakeVertex
  let s: TestServer
  let api: ReturnType<typeof clientFor>

  beforeAll(async () => {
    bedrock = await startFakeBedrock({ credentials: AWS, region: 'us-east-1' })
    vertex = await startFakeVertex({
      accounts: [{ client_email: EMAIL, public_key: keys.publicKey }],
      projectId: PROJECT,
      region: REGION,
    })
    s = await startServer({
      dataDir: join(dir, 'data'),
      runtime,
      pool: { image: 'local', min: 0, max: 4, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
      // The fakes listen on loopback.
      allowPrivateWebhooks: true,
      metrics: true,
    })
    await s.berth.ready
    api = clientFor(s, (await s.user()).token)
  }, 120_000)
  afterAll(async () => {
    await s?.close()
    await bedrock?.close()
    await vertex?.close()
    await sweep(runtime, pool)
    rmSync(dir, { recursive: true, force: true })
  })

  /** A profile on `keyId` with Bash, on Sonnet 4.5, and an `env` secret (readable by design: the search's control). */
  const profileOn = async (keyId: string) => {
    const { id } = await api.profiles.create({
      body: {
        name: 'Agent',
        slug: `agent-${randomBytes(4).toString('hex')}`,
        api_key_id: keyId,
        default_tools: ['Bash'],
        model: 'claude-sonnet-4-5',
      },
    })
    await api.secrets.create({
      body: { name: `VISIBLE_${id.slice(-6).toUpperCase()}`, value: VISIBLE, profile_ids: [id] },
    })
    return id
  }

  const run = async (profileId: string, prompt: string): Promise<Task> => {
    const submitted = await api.tasks.submit({ body: { mode: 'batch', profile_id: profileId, prompt } })
    return waitForTask(api, submitted.task_id, { timeout: 150_000 })
  }

  /**
   * Submit `prompt` (whose Bash call sleeps `seconds`), and while the call sleeps search
   * the sandbox's processes (their environments and command lines, on this machine) and
   * its files as root for `needles()`; then let the call end and wait for the task.
   */
  const runSearched = async (profileId: string, seconds: number, needles: () => { name: string; form: string }[]) => {
    const submitted = await api.tasks.submit({
      body: { mode: 'batch', profile_id: profileId, prompt: searchedPrompt(seconds) },
    })
    let answer: SearchAnswer | null = null
    // The Bash call runs once its file is written (its `sleep` follows): search then.
    const container = await vi.waitFor(
      async () => {
        const [found] = (await onEngine(runtime, pool)).filter(
          (c) => c.labels['berth.workspace'] === submitted.workspace_id,
        )
        expect(found, 'the task has a sandbox').toBeDefined()
        const written = await collectExec(await runtime.exec(found!.id, { cmd: ['test', '-s', '/workspace/env.txt'] }))
        expect(written.exitCode).toBe(0)
        return found
      },
      { timeout: 120_000, interval: 200 },
    )
    const wanted = [...needles(), { name: 'env secret', form: VISIBLE }]
    const envs = hostSearch(wanted)
    const files = await collectExec(
      await runtime.exec(container!.id, {
        cmd: ['node', '-e', SEARCH],
        user: 'root',
        stdin: JSON.stringify({
          needles: wanted,
          skip: ['/proc', '/sys', '/dev', '/usr', '/lib', '/lib64', '/bin', '/sbin'],
          files: true,
        }),
      }),
    )
    expect(files.exitCode, files.stderr).toBe(0)
    const inFiles = JSON.parse(files.stdout) as SearchAnswer
    answer = { ...inFiles, found: [...envs.found, ...inFiles.found] }
    await endSleep(runtime, null, seconds)
    const task = await waitForTask(api, submitted.task_id, { timeout: 150_000 })
    return { task, answer }
  }

  it('a task on a Bedrock credential completes through the signing gateway; no AWS secret is in the sandbox', async () => {
    const key = await api.apiKeys.create({
      body: {
        name: 'aws',
        provider: 'bedrock',
        aws_access_key_id: AWS.accessKeyId,
        aws_secret_access_key: AWS.secretAccessKey,
        aws_session_token: AWS.sessionToken,
        aws_region: 'us-east-1',
        base_url: bedrock.url,
        allowed_models: ['claude-*'],
      },
    })
    expect(key).toMatchObject({ provider: 'bedrock', has_key: true, has_session_token: true, aws_region: 'us-east-1' })
    const needles = () => [
      ...forms(AWS.secretAccessKey).map((form) => ({ name: 'aws secret', form })),
      ...forms(AWS.sessionToken).map((form) => ({ name: 'session token', form })),
    ]
    const { task, answer } = await runSearched(await profileOn(key.id), 293, needles)
    expect(task.error).toBeNull()
    expect(task.status).toBe('completed')
    expect(task.result?.text).toContain('Looked around.')
    expect(task.result?.cost_usd).toBeGreaterThan(0)
    expect(answer.files).toBeGreaterThan(10)
    expect(answer.found.filter((f) => f.name !== 'env secret')).toEqual([])
    // The search sees the sandbox: the env secret is in the agent's environment and the file it wrote.
    expect(answer.found.some((f) => f.where.endsWith('/environ'))).toBe(true)
    expect(answer.found.some((f) => f.where === '/workspace/env.txt')).toBe(true)
    // Claude Code spoke Bedrock's protocol to the gateway, which signed every call to the fake.
    const invoked = bedrock.requests.filter((r) => r.model !== null)
    expect(invoked.length).toBeGreaterThanOrEqual(2)
    for (const r of invoked) {
      expect(r).toMatchObject({ signed: true, status: 200, model: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0' })
      expect(r.path).toMatch(/\/invoke(-with-response-stream)?$/)
    }
    const metrics = await (await s.request('/metrics', { token: ADMIN_TOKEN })).text()
    expect(metrics).toMatch(
      /berth_model_cost_usd_total\{provider="bedrock",model="claude-sonnet-4-5-20250929"\} [0-9.e-]+/,
    )
  }, 300_000)

  it('a wrong AWS secret: Bedrock refuses the signature and the task ends with MODEL_ERROR', async () => {
    const key = await api.apiKeys.create({
      body: {
        name: 'aws-wrong',
        provider: 'bedrock',
        aws_access_key_id: AWS.accessKeyId,
        aws_secret_access_key: randomBytes(30).toString('base64'),
        aws_session_token: AWS.sessionToken,
        aws_region: 'us-east-1',
        base_url: bedrock.url,
      },
    })
    const before = bedrock.requests.length
    const task = await run(await profileOn(key.id), 'Hello. [[berth:text Never said.]]')
    expect(task.status).toBe('failed')
    expect(task.error?.code).toBe('MODEL_ERROR')
    const refused = bedrock.requests.slice(before)
    expect(refused.length).toBeGreaterThan(0)
    expect(refused.every((r) => !r.signed && r.status === 403)).toBe(true)
  }, 300_000)

  const vertexKey = async (name: string, privatePem: string) =>
    api.apiKeys.create({
      body: {
        name,
        provider: 'vertex',
        gcp_service_account: {
          type: 'service_account',
          project_id: PROJECT,
          private_key_id: randomBytes(20).toString('hex'),
          private_key: privatePem,
          client_email: EMAIL,
          token_uri: vertex.tokenUri,
        },
        gcp_region: REGION,
        base_url: vertex.baseUrl,
      },
    })

  it('a task on a Vertex AI credential completes with minted tokens; neither the key nor a token is in the sandbox', async () => {
    const key = await vertexKey('gcp', privateKey)
    expect(key).toMatchObject({ provider: 'vertex', has_key: true, gcp_project_id: PROJECT, gcp_client_email: EMAIL })
    // A line from the middle of the PEM: the key's own bytes, whichever way they were printed.
    const pemLine = privateKey.split('\n')[5]!
    const needles = () => [
      ...forms(pemLine).map((form) => ({ name: 'service account key', form })),
      ...vertex.issuedTokens().flatMap((t) => forms(t).map((form) => ({ name: 'access token', form }))),
    ]
    const { task, answer } = await runSearched(await profileOn(key.id), 291, needles)
    expect(vertex.issuedTokens().length).toBeGreaterThan(0)
    expect(task.error).toBeNull()
    expect(task.status).toBe('completed')
    expect(task.result?.text).toContain('Looked around.')
    expect(answer.files).toBeGreaterThan(10)
    expect(answer.found.filter((f) => f.name !== 'env secret')).toEqual([])
    expect(answer.found.some((f) => f.where === '/workspace/env.txt')).toBe(true)
    const predicted = vertex.requests.filter((r) => r.model !== null)
    expect(predicted.length).toBeGreaterThanOrEqual(2)
    for (const r of predicted) {
      expect(r.status).toBe(200)
      expect(r.path).toBe(
        `/v1/projects/${PROJECT}/locations/${REGION}/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict`,
      )
    }
    const metrics = await (await s.request('/metrics', { token: ADMIN_TOKEN })).text()
    expect(metrics).toMatch(/berth_model_cost_usd_total\{provider="vertex",model="claude-sonnet-4-5-20250929"\} /)
  }, 300_000)

  it('a key the token endpoint refuses ends the task with MODEL_ERROR; Vertex is never asked', async () => {
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
    const key = await vertexKey('gcp-wrong', other.export({ type: 'pkcs8', format: 'pem' }).toString())
    const before = vertex.requests.length
    const task = await run(await profileOn(key.id), 'Hello. [[berth:text Never said.]]')
    expect(task.status).toBe('failed')
    expect(task.error?.code).toBe('MODEL_ERROR')
    const seen = vertex.requests.slice(before)
    expect(seen.length).toBeGreaterThan(0)
    expect(seen.every((r) => r.path === '/token' && r.refused?.startsWith('invalid_grant'))).toBe(true)
  }, 300_000)

  it.each(['bedrock', 'vertex'] as const)(
    "on %s, Claude Code's dear call is cut mid-stream at the task's budget: the task ends BUDGET_EXCEEDED",
    async (provider) => {
      const key =
        provider === 'vertex'
          ? await vertexKey('gcp-budget', privateKey)
          : await api.apiKeys.create({
              body: {
                name: 'aws-budget',
                provider: 'bedrock',
                aws_access_key_id: AWS.accessKeyId,
                aws_secret_access_key: AWS.secretAccessKey,
                aws_session_token: AWS.sessionToken,
                aws_region: 'us-east-1',
                base_url: bedrock.url,
              },
            })
      const fake = provider === 'vertex' ? vertex.requests : bedrock.requests
      const before = fake.length
      const submitted = await api.tasks.submit({
        body: {
          mode: 'batch',
          profile_id: await profileOn(key.id),
          prompt: `Answer. ${DEAR} [[berth:text Hi.]]`,
          max_budget_usd: BUDGET,
        },
      })
      const task = await waitForTask(api, submitted.task_id, { timeout: 150_000 })
      expect([task.status, task.error?.code], JSON.stringify(task.error)).toEqual(['failed', 'BUDGET_EXCEEDED'])
      expect(task.result!.cost_usd).toBeGreaterThanOrEqual(BUDGET)
      expect(task.result!.cost_usd).toBeLessThan(DEAR_CALL)
      // Its retries (if any) were refused by the gateway: the provider saw the dear call once.
      const dear = fake.slice(before).filter((r) => JSON.stringify(r.body ?? null).includes('input=1000000'))
      expect(dear).toHaveLength(1)
    },
    300_000,
  )

  it('tokens that are expired when issued end the task with MODEL_ERROR', async () => {
    const key = await vertexKey('gcp-expired', privateKey)
    vertex.issueExpired(true)
    try {
      const before = vertex.requests.length
      const task = await run(await profileOn(key.id), 'Hello. [[berth:text Never said.]]')
      expect(task.status).toBe('failed')
      expect(task.error?.code).toBe('MODEL_ERROR')
      expect(vertex.requests.slice(before).some((r) => r.refused === 'expired token')).toBe(true)
    } finally {
      vertex.issueExpired(false)
    }
  }, 300_000)
})
