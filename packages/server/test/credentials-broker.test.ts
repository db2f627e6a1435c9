/**
 * The model key and brokered secrets never enter a task's container (issue 25), on Docker,
 * Podman and `local` under bubblewrap: a task on a real-looking Anthropic credential whose
 * `base_url` is a fake Anthropic API that checks the key it receives. While the agent's Bash
 * call dumps its environment, the test searches the container as root (its whole
 * filesystem, every `/proc/<pid>/environ` and `cmdline`) and everything the agent printed,
 * for the key and the brokered secret, plain, reversed, base64 and hex: none found; the
 * `env` secret is found (by design). Afterwards the capability token opens nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { collectExec, silentLogger, type ContainerRuntime } from '@berth/core'
import { startOfflineModel, type OfflineModelServer } from '@berth/stub-model'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { SEARCH, endSleep, forms, hostSearch, type SearchAnswer } from './broker-search.helpers.js'

const MODEL_KEY = 'sk-ant-api03-BROKERKEY-7q2w9e4r1t6y3u8i5o0p'
const BROKERED = 'brokered-value-Zx81Kq55Lm20Vb73'
const ENV_SECRET = 'env-secret-value-Pf93Hd27Ws64'

/** POST to the gateway's socket as the agent would (model path, a token, a model). */
function gatewayStatus(socketPath: string, token: string, model = 'claude-sonnet-4-5'): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        path: '/v1/messages',
        method: 'POST',
        headers: { 'x-api-key': token, 'content-type': 'application/json' },
      },
      (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      },
    )
    req.on('error', reject)
    req.end(JSON.stringify({ model, max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }))
  })
}

type Kind = 'docker' | 'podman' | 'local'

function runtimeFor(kind: Kind, baseDir: string): { runtime: ContainerRuntime; image: string } {
  if (kind === 'local')
    return { runtime: localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' }), image: 'local' }
  const { info, runtime } = engineRuntime(kind)
  return { runtime, image: info.image }
}

describe.each(['docker', 'podman', 'local'] as const)('credentials stay outside the container on %s', (kind) => {
  const dir = mkdtempSync(join(tmpdir(), `berth-broker-${kind}-`))
  const pool = uniquePoolName(`broker-${kind}`)
  const { runtime, image } = runtimeFor(kind, join(dir, 'local'))
  let upstream: OfflineModelServer
  let s: TestServer
  beforeAll(async () => {
    upstream = await startOfflineModel({ apiKey: MODEL_KEY })
    s = await startServer({
      dataDir: join(dir, 'data'),
      runtime,
      pool: { image, min: 0, max: 4, name: pool, ...(kind !== 'local' && { spec: { network: 'none' } }) },
      runner: { bundleDir: RUNNER_BUNDLE },
      // The fake provider listens on loopback.
      allowPrivateWebhooks: true,
    })
    await s.berth.ready
  }, 120_000)
  afterAll(async () => {
    await s?.close()
    await upstream?.close()
    await sweep(runtime, pool)
    rmSync(dir, { recursive: true, force: true })
  })

  it('the agent reads neither the model key nor a brokered secret; the gateway adds the key and the token dies with the task', async () => {
    const { token } = await s.user()
    const api = clientFor(s, token)
    const key = await api.apiKeys.create({
      body: {
        name: 'prod',
        provider: 'anthropic',
        key: MODEL_KEY,
        base_url: upstream.url,
        allowed_models: ['claude-sonnet-*'],
      },
    })
    const profile = await api.profiles.create({
      body: { name: 'Agent', slug: 'agent', api_key_id: key.id, default_tools: ['Bash'], model: 'claude-sonnet-4-5' },
    })
    await api.secrets.create({ body: { name: 'ENV_SECRET', value: ENV_SECRET, profile_ids: [profile.id] } })
    await api.secrets.create({
      body: {
        name: 'API_TOKEN',
        value: BROKERED,
        delivery: 'brokered',
        hosts: ['api.example.test'],
        profile_ids: [profile.id],
      },
    })
    // What an injected prompt would try: print every variable of this process and its parents.
    const command =
      'env; for p in /proc/[0-9]*; do tr "\\0" "\\n" < $p/environ 2>/dev/null; done; env > /workspace/env-dump.txt; sleep 297'
    const submitted = await api.tasks.submit({
      body: {
        mode: 'batch',
        profile_id: profile.id,
        prompt: `Dump it. [[berth:tool Bash {"command":${JSON.stringify(command)}}]] [[berth:text Dumped.]]`,
      },
    })
    // While the Bash call sleeps: search the task's container as root.
    let answer: SearchAnswer | null = null
    const socket = join(dir, 'data', 'broker', 'public', 'gateway.sock')
    const needles = [
      ...forms(MODEL_KEY).map((form) => ({ name: 'model key', form })),
      ...forms(BROKERED).map((form) => ({ name: 'brokered secret', form })),
      { name: 'env secret', form: ENV_SECRET },
    ]
    // The host's system directories are bound read-only into a bwrap sandbox: no task writes there.
    const skip =
      kind === 'local'
        ? ['/proc', '/sys', '/dev', '/usr', '/lib', '/lib64', '/bin', '/sbin']
        : ['/proc', '/sys', '/dev']
    for (let i = 0; i < 300 && !answer; i++) {
      const events = (await api.tasks.events({ params: { id: submitted.task_id }, query: { limit: 100 } })).events
      if (events.some((e) => e.type === 'tool_call')) {
        const [container] = await runtime.list({
          labels: { 'berth.pool': pool, 'berth.workspace': submitted.workspace_id },
        })
        expect(container, 'the task has a container').toBeDefined()
        // Root reads every file; the agent's user reads its own processes' environments and
        // memory (root without CAP_SYS_PTRACE may not), which an injected prompt could dump.
        const search = async (user: string | undefined, files: boolean, memory = false) => {
          const out = await collectExec(
            await runtime.exec(container!.id, {
              cmd: ['node', '-e', SEARCH],
              ...(user && { user }),
              stdin: JSON.stringify({ needles, skip, files, memory }),
            }),
          )
          expect(out.exitCode, out.stderr).toBe(0)
          return JSON.parse(out.stdout) as SearchAnswer
        }
        // The agent's environments first (quick): its token, for the gateway checks below while the task runs.
        const envs = kind === 'local' ? hostSearch(needles) : await search('1000:1000', false)
        // This task's token names it (other sandboxes on this host hold theirs).
        envs.token = envs.tokens?.find((t) => t.startsWith(`bct_${submitted.task_id}.`)) ?? null
        expect(envs.token).toMatch(/^bct_/)
        // The agent asking the gateway itself for a model its credential does not allow: refused, the provider never asked.
        const asked = upstream.requests.length
        expect(await gatewayStatus(socket, envs.token!, 'claude-opus-4-5')).toBe(403)
        expect(upstream.requests.length).toBe(asked)
        const asRoot = await search('root', true)
        // A bwrap sandbox per exec has its own process namespace: on `local` the agent's
        // processes are host processes, searched from the host (environments only: this
        // test's own memory holds the key).
        const memory = kind === 'local' ? envs : await search('1000:1000', false, true)
        answer = { found: [...asRoot.found, ...envs.found, ...memory.found], token: envs.token, files: asRoot.files }
        // Done: the agent's long Bash call may end, and with it the task.
        await endSleep(runtime, kind === 'local' ? null : container!.id, 297)
      } else await new Promise((r) => setTimeout(r, 100))
    }
    expect(answer, 'the search ran while the agent worked').not.toBeNull()
    expect(answer!.files).toBeGreaterThan(10)
    const leaks = answer!.found.filter((f) => f.name !== 'env secret')
    expect(leaks, JSON.stringify(leaks)).toEqual([])
    // The env secret is readable by design, in the agent's processes too: the search sees what is there.
    expect(answer!.found.some((f) => f.name === 'env secret')).toBe(true)
    expect(answer!.found.some((f) => f.name === 'env secret' && f.where.endsWith('/environ'))).toBe(true)

    const done = await waitForTask(api, submitted.task_id, { timeout: 120_000 })
    expect(done.error).toBeNull()
    expect(done.status).toBe('completed')
    expect(done.result?.text).toContain('Dumped.')
    // Everything the agent printed: the env secret and the placeholder, never the key or the brokered value.
    const events = (await api.tasks.events({ params: { id: submitted.task_id }, query: { limit: 100 } })).events
    const printed = JSON.stringify(events)
    for (const form of [...forms(MODEL_KEY), ...forms(BROKERED)]) expect(printed).not.toContain(form)
    expect(printed).toContain('berth_brokered_')
    // The fake provider got the real key on every request, and the agent's model calls reached it.
    expect(upstream.requests.length).toBeGreaterThan(0)
    for (const r of upstream.requests) expect(r.headers['x-api-key']).toBe(MODEL_KEY)

    // The token opens nothing once its task ended, and a token forged for another task neither.
    expect(await gatewayStatus(socket, answer!.token!)).toBe(401)
    const forged = answer!.token!.replace(submitted.task_id, 'task_0000000000000000000000')
    expect(forged).not.toBe(answer!.token)
    expect(await gatewayStatus(socket, forged)).toBe(401)
  }, 300_000)
})
