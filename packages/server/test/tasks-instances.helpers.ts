/** Several Berth instances on the `local` runtime sharing one store and one coordination backend. */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger, type Coordination, type Store, type Task } from '@berth/core'
import { createStorage } from 'unstorage'
import { ADMIN_TOKEN, startServer, type TestServer, type Json } from './helpers.js'
import { eventually, onEngine, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

/** What the instances share: coordination per instance (one backend) and, optionally, a store per instance (one backend). */
export interface Backend {
  coordination(i: number): Coordination | Promise<Coordination>
  /** Default: one unstorage memory store shared by all. */
  store?(i: number): Store
}

export interface Instance {
  s: TestServer
  coordination: Coordination
  call(method: string, path: string, json?: unknown): Promise<{ status: number; body: Json; headers: Headers }>
  close(): Promise<void>
}

/**
 * A cluster: `maxes[i]` is instance i's pool max. One user, key and profile, made on the
 * first instance (the store is shared, so every instance knows them).
 */
export async function startCluster(maxes: number[], backend: Backend, opts: { recoveryGraceMs?: number } = {}) {
  const storage = createStorage()
  const dirs: string[] = []
  const instances: Instance[] = []
  let token = ''
  for (const [i, max] of maxes.entries()) {
    const baseDir = mkdtempSync(join(tmpdir(), 'berth-instances-'))
    dirs.push(baseDir)
    const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
    const pool = uniquePoolName(`inst${i}`)
    const coordination = await backend.coordination(i)
    const store = backend.store?.(i)
    const s = await startServer({
      ...(store ? { storage: undefined, store } : { storage }),
      runtime,
      coordination,
      pool: { image: 'local', min: 0, max, name: pool },
      runner: { bundleDir: RUNNER_BUNDLE },
      recoveryGraceMs: opts.recoveryGraceMs ?? 300,
    })
    await s.berth.ready
    const call: Instance['call'] = async (method, path, json) => {
      const res = await s.request(path, { method, token, ...(json !== undefined && { json }) })
      const text = await res.text()
      return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json, headers: res.headers }
    }
    let closed = false
    instances.push({
      s,
      coordination,
      call,
      async close() {
        if (closed) return
        closed = true
        await s.close()
        await coordination.close().catch(() => {})
        await Promise.all((await onEngine(runtime, pool)).map((c) => runtime.remove(c.id)))
      },
    })
  }
  const admin = await instances[0]!.s.request('/admin/users', { method: 'POST', token: ADMIN_TOKEN, json: { name: 'Cluster user', role: 'user' } })
  const user = (await admin.json()) as { user: { id: string }; key: { token: string } }
  token = user.key.token
  const a = instances[0]!
  const key = await a.call('POST', '/v1/api-keys', { name: 'offline', provider: 'stub' })
  const profile = await a.call('POST', '/v1/profiles', { name: 'Agent', slug: 'agent', api_key_id: key.body.id, default_tools: ['Bash'] })
  const profileId = profile.body.id as string
  const waitStatus = (inst: Instance, taskId: string, statuses: string[], ms = 90_000) =>
    eventually(async () => {
      const t = (await inst.call('GET', `/v1/tasks/${taskId}`)).body as Task
      if (!statuses.includes(t.status)) throw new Error(`still ${t.status}`)
      return t
    }, ms)
  const waitDone = (inst: Instance, taskId: string) => waitStatus(inst, taskId, ['completed', 'failed', 'cancelled'])
  const submit = (inst: Instance, body: Json) => inst.call('POST', '/v1/tasks', { mode: 'batch', profile_id: profileId, ...body })
  const close = async () => {
    for (const inst of instances) await inst.close()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  }
  return { instances, token, ownerId: user.user.id, profileId, submit, waitStatus, waitDone, close }
}

/** A prompt whose agent takes `turns` slow turns (about a second each), then answers. */
export const slowPrompt = (turns: number, text = 'Done slowly.') => `Take your time. [[berth:slow 1000]] [[berth:turns ${turns}]] [[berth:text ${text}]]`
