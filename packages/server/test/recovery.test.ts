/**
 * The server dies (SIGKILL) while a task runs; a new server on the same data dir and
 * engine ends the task with its real result or a definite failure, and leaves no orphan.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { readEngine } from '@berth/testkit'
import { afterAll, expect, it, vi } from 'vitest'
import { ADMIN_TOKEN } from './helpers.js'
import { engineRuntime, onEngine, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'

const script = fileURLToPath(new URL('./fixtures/server-process.ts', import.meta.url))
const dataDir = mkdtempSync(join(tmpdir(), 'berth-recovery-'))
const pool = uniquePoolName('recovery')
const { runtime } = engineRuntime('podman')
const children: ChildProcess[] = []

/** Start a server process; resolves its base URL once it listens (after its recovery). */
function startProcess(): Promise<{ url: string; child: ChildProcess }> {
  const info = readEngine('podman')
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    // One container: a second task has to wait in the queue.
    env: { ...process.env, DATA_DIR: dataDir, ADMIN_TOKEN, SOCKET: info.socketPath, IMAGE: info.image, POOL: pool, POOL_MAX: '1', BUNDLE: RUNNER_BUNDLE },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  children.push(child)
  return new Promise((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (d) => {
      out += d
      const m = out.match(/listening (\d+)/)
      if (m) resolve({ url: `http://127.0.0.1:${m[1]}`, child })
    })
    child.on('exit', (code) => reject(new Error(`server process exited (${code}) before listening`)))
  })
}

afterAll(async () => {
  // SIGTERM, not SIGKILL: a killed server may leave a container create in flight that the
  // engine finishes after the sweep below (a leaked container in state "created").
  await Promise.all(
    children
      .filter((c) => c.exitCode === null && c.signalCode === null)
      .map(
        (c) =>
          new Promise<void>((done) => {
            const force = setTimeout(() => c.kill('SIGKILL'), 15_000)
            c.once('exit', () => {
              clearTimeout(force)
              done()
            })
            c.kill('SIGTERM')
          }),
      ),
  )
  await sweep(runtime, pool)
  rmSync(dataDir, { recursive: true, force: true })
})

it('a task running when the server is SIGKILLed ends definitely after a restart, a queued one still runs, no orphan container', async () => {
  const first = await startProcess()
  const call = async (url: string, method: string, path: string, token: string, json?: unknown) => {
    const res = await fetch(url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(json !== undefined && { 'content-type': 'application/json' }) },
      ...(json !== undefined && { body: JSON.stringify(json) }),
    })
    return (await res.json()) as Record<string, any>
  }
  const { key } = await call(first.url, 'POST', '/admin/users', ADMIN_TOKEN, { name: 'Survivor' })
  const token = key.token as string
  const apiKey = await call(first.url, 'POST', '/v1/api-keys', token, { name: 'offline', provider: 'stub' })
  const profile = await call(first.url, 'POST', '/v1/profiles', token, { name: 'P', slug: 'p', api_key_id: apiKey.id, default_tools: ['Bash'] })
  const sub = await call(first.url, 'POST', '/v1/tasks', token, {
    mode: 'batch',
    profile_id: profile.id,
    prompt: 'Work slowly. [[berth:slow 150]] [[berth:turns 4]] [[berth:text finished after the crash]]',
  })
  await vi.waitFor(async () => {
    const events = (await call(first.url, 'GET', `/v1/tasks/${sub.task_id}/events`, token)).events as { type: string }[]
    expect(events.some((e) => e.type === 'token')).toBe(true)
  }, 30_000)
  const queued = await call(first.url, 'POST', '/v1/tasks', token, { mode: 'batch', profile_id: profile.id, prompt: 'Queued. [[berth:text ran after the restart]]' })
  expect((await call(first.url, 'GET', `/v1/tasks/${queued.task_id}`, token)).status).toBe('queued')
  first.child.kill('SIGKILL')
  await new Promise((r) => first.child.once('exit', r))

  const second = await startProcess()
  const task = await vi.waitFor(async () => {
    const t = await call(second.url, 'GET', `/v1/tasks/${sub.task_id}`, token)
    expect(['completed', 'failed']).toContain(t.status)
    return t
  }, 60_000)
  if (task.status === 'completed') {
    expect(task.result.text).toContain('finished after the crash')
  } else {
    expect(task.error.code).toBe('CONTAINER_FAILED')
    expect(task.error.error).toMatch(/restart/)
  }
  // No orphan: what the engine holds for this pool is exactly what the new server accounts for.
  await vi.waitFor(async () => {
    const engine = (await onEngine(runtime, pool)).map((c) => c.labels['berth.container']).sort()
    const pooled = ((await call(second.url, 'GET', '/v1/pool/containers', ADMIN_TOKEN)).containers as { id: string; state: string }[])
    expect(engine).toEqual(pooled.map((c) => c.id).sort())
    expect(pooled.every((c) => c.state === 'idle')).toBe(true)
  }, 20_000)
  // The task that was waiting in the queue survived the crash and ran.
  const later = await vi.waitFor(async () => {
    const t = await call(second.url, 'GET', `/v1/tasks/${queued.task_id}`, token)
    expect(t.status).toBe('completed')
    return t
  }, 60_000)
  expect(later.result.text).toContain('ran after the restart')
  const ws = await call(second.url, 'GET', `/v1/workspaces/${task.workspace_id}`, token)
  expect(ws.status).toBe('idle')
  console.error(`[recovery] task ended ${task.status}${task.error ? ` (${task.error.error})` : ''}`)
})
