/** A server with a real engine, warm pool and the runner bundle, plus a caller with a stub profile. */
import type { SubmitTaskInput } from '@berth/client'
import type { BerthOptions } from '@berth/server'
import { clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { engineRuntime, type ENGINES, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

/** A server on `engine` with a warm pool and the runner bundle mounted in every container. */
export async function taskServer(
  engine: (typeof ENGINES)[number],
  opts: {
    concurrency?: number
    max?: number
    min?: number
    warmAgents?: number
    sessionIdleMs?: number
    berth?: Partial<BerthOptions>
  } = {},
) {
  const { info, runtime } = engineRuntime(engine)
  const pool = uniquePoolName(`tasks-${engine}`)
  const s = await startServer({
    runtime,
    pool: {
      image: info.image,
      min: opts.min ?? 1,
      max: opts.max ?? 8,
      name: pool,
      spec: { network: 'none' },
      ...(opts.warmAgents && { warmAgents: opts.warmAgents }),
    },
    runner: { bundleDir: RUNNER_BUNDLE },
    concurrency: opts.concurrency ?? 20,
    ...(opts.sessionIdleMs !== undefined && { sessionIdleMs: opts.sessionIdleMs }),
    ...opts.berth,
  })
  await s.berth.ready
  return { s, runtime, pool, ...(await agentUser(s)) }
}

/** A user of `s` with a stub credential and a Bash profile, and typed ways to run tasks as it. */
export async function agentUser(s: TestServer, opts: { waitMs?: number } = {}) {
  const { token, id } = await s.user()
  const api = clientFor(s, token)
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const profile = await api.profiles.create({
    body: { name: 'Agent', slug: 'agent', api_key_id: key.id, default_tools: ['Bash'] },
  })
  /** Submit as this user (a batch task on its profile unless `body` says otherwise). */
  const submit = (body: Partial<SubmitTaskInput> & { prompt: string }) =>
    api.tasks.submit({ body: { mode: 'batch', profile_id: profile.id, ...body } })
  /** Wait until the task is done. */
  const waitDone = (taskId: string) => waitForTask(api, taskId, { timeout: opts.waitMs ?? 60_000 })
  /** Submit and wait until the task is done. */
  const run = async (body: Partial<SubmitTaskInput> & { prompt: string }) => waitDone((await submit(body)).task_id)
  const events = async (taskId: string) =>
    (await api.tasks.events({ params: { id: taskId }, query: { limit: 100 } })).events
  return { token, id, api, submit, run, waitDone, events, profileId: profile.id, keyId: key.id }
}
