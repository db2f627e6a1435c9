/**
 * Reads through the per-instance view cache (issue 43) are never stale. On the `local`
 * runtime (bubblewrap) with the offline model: a task read while it runs, then again the
 * moment it ends, shows its end and result at once, on one instance and, over two instances
 * sharing a store and a coordination (a `memoryHub`, and a real redis-server), on the one
 * that ran it and on the other; its workspace shows what the store holds; a revoked caller
 * key is refused at once on both; another caller's task and workspace stay a 404 on both;
 * and a view carries exactly its schema's keys.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { Task, silentLogger, type TaskBusMessage } from '@berth/core'
import type { Berth } from '@berth/server'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { ADMIN_TOKEN, agentUser, startCluster, type Backend, type Cluster, type Instance } from './cluster.helpers.js'
import { startServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser as serverAgent } from './tasks.helpers.js'

/** A task that runs for a few seconds (slow turns of the offline model), then answers. */
const SLOW = 'Take your time. [[berth:slow 700]] [[berth:turns 3]] [[berth:text Done, the answer is 42.]]'

type Reader = { url: string; berth: Berth }
const read = async (i: Reader, token: string, path: string) => {
  const res = await fetch(i.url + path, { headers: { authorization: `Bearer ${token}` } })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

/** Resolves with the task's view as the instance that ended it published it (after its end was stored). */
function ended(on: Berth, taskId: string): Promise<Task> {
  return new Promise((resolve) => {
    const off = on.services.bus.subscribe(taskId, (m: TaskBusMessage) => {
      if (m.type === 'task.status' && ['completed', 'failed', 'cancelled'].includes(m.status)) {
        off()
        resolve(m.task as Task)
      }
    })
  })
}

/**
 * Submit a slow task on `runner`, read it (and its workspace) on every reader while it
 * runs, twice, so a cache that kept a running view would hold it; then, the moment the
 * runner publishes its end, read it on every reader: completed with its result, at once.
 */
async function endSeenAtOnce(
  runner: Reader,
  readers: Reader[],
  agent: { token: string; id: string; profileId: string },
) {
  const { token, profileId } = agent
  const sub = await fetch(`${runner.url}/v1/tasks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ mode: 'batch', profile_id: profileId, prompt: SLOW }),
  }).then((r) => r.json() as Promise<{ task_id: string; workspace_id: string }>)
  const end = ended(runner.berth, sub.task_id)
  const path = `/v1/tasks/${sub.task_id}`
  await vi.waitFor(async () => expect((await read(runner, token, path)).body.status).toBe('running'), {
    timeout: 60_000,
    interval: 50,
  })
  for (const r of readers)
    for (let i = 0; i < 2; i++) {
      expect((await read(r, token, path)).body.status).toMatch(/running|completed/)
      expect((await read(r, token, `/v1/workspaces/${sub.workspace_id}`)).status).toBe(200)
    }
  const published = await end
  expect(published.status).toBe('completed')
  for (const r of readers) {
    const { status, body } = await read(r, token, path)
    expect(status).toBe(200)
    expect(body).toEqual(JSON.parse(JSON.stringify(published)))
    expect((body.result as { text: string }).text).toContain('the answer is 42')
    // Exactly the schema's keys: nothing the record holds beside them (owner, instance, trace).
    expect(Object.keys(body).sort()).toEqual(Object.keys(Task.entries).sort())
  }
  // The workspace as the store holds it once its container is released after the end, at once.
  const stored = () => runner.berth.services.workspaces.records.find(agent.id, sub.workspace_id)
  await vi.waitFor(async () => expect((await stored())?.status).not.toBe('running'), { timeout: 30_000, interval: 50 })
  const record = (await stored())!
  for (const r of readers) {
    const { body } = await read(r, token, `/v1/workspaces/${sub.workspace_id}`)
    expect(body.status).toBe(record.status)
    expect(body).not.toHaveProperty('owner_id')
    expect(body).not.toHaveProperty('sdk_session_id')
  }
  return sub
}

describe('one instance (the cache keeps every view until its record is written)', () => {
  let s: Awaited<ReturnType<typeof startServer>>
  let close: () => Promise<void>
  let agent: Awaited<ReturnType<typeof serverAgent>>
  beforeAll(async () => {
    const baseDir = mkdtempSync(join(tmpdir(), 'berth-read-cache-'))
    const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
    const pool = uniquePoolName('read-cache')
    s = await startServer({
      runtime,
      pool: { image: 'local', min: 0, max: 2, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
    })
    await s.berth.ready
    close = async () => {
      await s.close()
      await Promise.all((await onEngine(runtime, pool)).map((c) => runtime.remove(c.id)))
      rmSync(baseDir, { recursive: true, force: true })
    }
    agent = await serverAgent(s)
  }, 120_000)
  afterAll(async () => close?.())

  it("a task's status and result, and its workspace, are read as stored the moment it ends", async () => {
    await endSeenAtOnce(s, [s], agent)
  }, 120_000)
})

let redis: LocalRedis | undefined
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(async () => {
  await redis?.stop()
})

describe.each(['memory', 'redis'] satisfies Backend[])('two instances sharing a %s backend', (backend) => {
  let c: Cluster
  let one: Instance
  let two: Instance
  let agent: Awaited<ReturnType<typeof agentUser>>
  beforeAll(async () => {
    // Instance one runs the tasks; two has no room and only reads.
    c = await startCluster(backend, { redis, local: { maxes: [2, 0], sandbox: 'bwrap' } })
    ;[one, two] = c.instances as [Instance, Instance]
    agent = await agentUser(c)
  }, 120_000)
  afterAll(async () => c?.close())

  it("a task's end and result are seen at once on the instance that ran it and on the other", async () => {
    await endSeenAtOnce(one, [one, two], agent)
  }, 120_000)

  it('a revoked caller key is refused at once on both instances; another key of the user still works', async () => {
    const user = await c.user('Revoked')
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }
    const second = await fetch(`${one.url}/admin/users/${user.id}/keys`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({ name: 'second' }),
    }).then((r) => r.json() as Promise<{ id: string; token: string }>)
    const keys = await fetch(`${one.url}/admin/users/${user.id}/keys`, { headers: admin }).then(
      (r) => r.json() as Promise<{ keys: { id: string }[] }>,
    )
    const first = keys.keys.find((k) => k.id !== second.id)!
    // Both instances have verified both keys: both trust them from memory now.
    for (const i of [one, two])
      for (const token of [user.token, second.token]) expect((await read(i, token, '/v1/profiles')).status).toBe(200)

    const revoked = await fetch(`${two.url}/admin/keys/${first.id}`, { method: 'DELETE', headers: admin })
    expect(revoked.status).toBe(204)
    for (const i of [one, two]) {
      expect(await read(i, user.token, '/v1/profiles')).toMatchObject({ status: 401 })
      expect((await read(i, second.token, '/v1/profiles')).status).toBe(200)
    }
  }, 60_000)

  it("another caller's task and workspace are a 404 on both instances, after the owner's reads", async () => {
    const sub = await endSeenAtOnce(one, [one, two], agent)
    const eve = await c.user('Eve')
    for (const i of [one, two]) {
      // The owner's ended task is kept by both instances now.
      expect((await read(i, agent.token, `/v1/tasks/${sub.task_id}`)).status).toBe(200)
      for (const path of [`/v1/tasks/${sub.task_id}`, `/v1/workspaces/${sub.workspace_id}`])
        expect(await read(i, eve.token, path)).toMatchObject({ status: 404, body: { code: 'NOT_FOUND' } })
    }
  }, 120_000)
})
