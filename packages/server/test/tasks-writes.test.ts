/**
 * How often one run writes its workspace's record: a store wrapper counts the writes of
 * the workspace's key while a real server runs real tasks on the `local` runtime.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import type { BerthClient, SubmitTaskInput } from '@berth/client'
import { silentLogger, type Store } from '@berth/core'
import { memoryStore } from '@berth/server'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

/** A store that counts its writes (`put` and `set`) per key. */
function countingStore(inner: Store): Store & { writes(key: string): number } {
  const counts = new Map<string, number>()
  const count = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1)
  return {
    get: (key) => inner.get(key),
    getMany: (keys) => inner.getMany(keys),
    keys: (prefix) => inner.keys(prefix),
    list: (scope, query) => inner.list(scope, query),
    remove: (key) => inner.remove(key),
    set: (key, value) => {
      count(key)
      return inner.set(key, value)
    },
    put: (key, value, index) => {
      count(key)
      return inner.put(key, value, index)
    },
    writes: (key) => counts.get(key) ?? 0,
  }
}

describe('workspace record writes per run (local runtime)', () => {
  const baseDir = mkdtempSync(join(tmpdir(), 'berth-writes-'))
  const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
  const pool = uniquePoolName('writes')
  const store = countingStore(memoryStore())
  let s: TestServer
  let owner: string
  let api: BerthClient
  let profileId: string

  beforeAll(async () => {
    s = await startServer({
      storage: undefined,
      store,
      runtime,
      pool: { image: 'local', min: 1, max: 4, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
    })
    await s.berth.ready
    const user = await s.user()
    owner = user.id
    api = clientFor(s, user.token)
    const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
    profileId = (
      await api.profiles.create({ body: { name: 'Agent', slug: 'agent', api_key_id: key.id, default_tools: ['Bash'] } })
    ).id
  })
  afterAll(async () => {
    await s.close()
    const left = await onEngine(runtime, pool)
    await Promise.all(left.map((c) => runtime.remove(c.id)))
    rmSync(baseDir, { recursive: true, force: true })
  })

  const submit = (body: Omit<SubmitTaskInput, 'profile_id'>) =>
    api.tasks.submit({ body: { profile_id: profileId, ...body } })
  const done = (taskId: string) => waitForTask(api, taskId)
  const workspace = (wsId: string) => s.berth.services.workspaces.records.get(owner, wsId)

  it('a batch task writes its workspace at most three times (created, running, idle with what the run learnt)', async () => {
    const sub = await submit({ mode: 'batch', prompt: 'Say hello. [[berth:text hello]]' })
    const task = await done(sub.task_id)
    expect(task.status, JSON.stringify(task.error)).toBe('completed')
    const ws = await workspace(sub.workspace_id)
    // What the run learnt is stored with its last write: idle, no container, the conversation id.
    expect(ws.status).toBe('idle')
    expect(ws.container_id).toBeNull()
    expect(ws.sdk_session_id).toEqual(expect.any(String))
    expect(store.writes(`workspaces:${owner}:${sub.workspace_id}`)).toBeLessThanOrEqual(3)
  })

  it('a session writes its workspace at most four times for its first prompt and twice for a follow-up in its warm container (one of them its living agent)', async () => {
    const first = await submit({ mode: 'session', prompt: 'Remember 42. [[berth:text noted]]' })
    expect((await done(first.task_id)).status).toBe('completed')
    const key = `workspaces:${owner}:${first.workspace_id}`
    const ws = await workspace(first.workspace_id)
    expect(ws.status).toBe('running')
    expect(ws.sdk_session_id).toEqual(expect.any(String))
    // Three for the run, one for its living agent (`agent`: since, tasks, background).
    expect(store.writes(key)).toBeLessThanOrEqual(4)
    expect(ws.agent).toMatchObject({ tasks: 1 })

    const before = store.writes(key)
    const next = await submit({
      mode: 'session',
      session_id: first.session_id!,
      prompt: 'And now? [[berth:text still here]]',
    })
    expect((await done(next.task_id)).status).toBe('completed')
    expect((await workspace(first.workspace_id)).sdk_session_id).toBe(ws.sdk_session_id)
    // `running`, and the living agent's count of tasks served.
    expect(store.writes(key) - before).toBeLessThanOrEqual(2)
  })
})
