/** A server with a real engine, warm pool and the runner bundle, plus a caller with a stub profile. */
import type { Task, TranscriptEvent } from '@berth/core'
import type { BerthOptions } from '@berth/server'
import { expect, vi } from 'vitest'
import { startServer } from './helpers.js'
import { engineRuntime, ENGINES, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

export type Json = Record<string, any>

/** A server on `engine` with a warm pool and the runner bundle mounted in every container. */
export async function taskServer(
  engine: (typeof ENGINES)[number],
  opts: { concurrency?: number; max?: number; min?: number; warmAgents?: number; sessionIdleMs?: number; berth?: Partial<BerthOptions> } = {},
) {
  const { info, runtime } = engineRuntime(engine)
  const pool = uniquePoolName(`tasks-${engine}`)
  const s = await startServer({
    runtime,
    pool: { image: info.image, min: opts.min ?? 1, max: opts.max ?? 8, name: pool, spec: { network: 'none' }, ...(opts.warmAgents && { warmAgents: opts.warmAgents }) },
    runner: { bundleDir: RUNNER_BUNDLE },
    concurrency: opts.concurrency ?? 20,
    ...(opts.sessionIdleMs !== undefined && { sessionIdleMs: opts.sessionIdleMs }),
    ...opts.berth,
  })
  await s.berth.ready
  const { token } = await s.user()
  const call = async (method: string, path: string, json?: unknown) => {
    const res = await s.request(path, { method, token, ...(json !== undefined && { json }) })
    const text = await res.text()
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json }
  }
  const key = await call('POST', '/v1/api-keys', { name: 'offline', provider: 'stub' })
  const profile = await call('POST', '/v1/profiles', { name: 'Agent', slug: 'agent', api_key_id: key.body.id, default_tools: ['Bash'] })
  /** Submit and wait until the task is done. */
  const run = async (body: Json): Promise<Task> => {
    const sub = await call('POST', '/v1/tasks', { mode: 'batch', profile_id: profile.body.id, ...body })
    expect(sub.status, JSON.stringify(sub.body)).toBe(202)
    return waitDone(sub.body.task_id)
  }
  const waitDone = (taskId: string) =>
    vi.waitFor(async () => {
      const t = (await call('GET', `/v1/tasks/${taskId}`)).body as Task
      if (!['completed', 'failed', 'cancelled'].includes(t.status)) throw new Error(`still ${t.status}`)
      return t
    }, 60_000)
  const events = async (taskId: string): Promise<TranscriptEvent[]> => (await call('GET', `/v1/tasks/${taskId}/events?limit=100`)).body.events
  return { s, runtime, pool, token, call, run, waitDone, events, profileId: profile.body.id as string, keyId: key.body.id as string }
}

