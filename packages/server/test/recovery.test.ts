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
import { ADMIN_TOKEN, clientFor, waitForTask } from './helpers.js'
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
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      ADMIN_TOKEN,
      SOCKET: info.socketPath,
      IMAGE: info.image,
      POOL: pool,
      POOL_MAX: '1',
      BUNDLE: RUNNER_BUNDLE,
    },
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
  const { key } = await clientFor(first, ADMIN_TOKEN).admin.users.create({ body: { name: 'Survivor' } })
  const token = key.token
  const api = clientFor(first, token)
  const apiKey = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const profile = await api.profiles.create({
    body: { name: 'P', slug: 'p', api_key_id: apiKey.id, default_tools: ['Bash'] },
  })
  const sub = await api.tasks.submit({
    body: {
      mode: 'batch',
      profile_id: profile.id,
      prompt: 'Work slowly. [[berth:slow 150]] [[berth:turns 4]] [[berth:text finished after the crash]]',
    },
  })
  await vi.waitFor(async () => {
    const { events } = await api.tasks.events({ params: { id: sub.task_id } })
    expect(events.some((e) => e.type === 'token')).toBe(true)
  }, 30_000)
  const queued = await api.tasks.submit({
    body: { mode: 'batch', profile_id: profile.id, prompt: 'Queued. [[berth:text ran after the restart]]' },
  })
  expect((await api.tasks.get({ params: { id: queued.task_id } })).status).toBe('queued')
  first.child.kill('SIGKILL')
  await new Promise((r) => first.child.once('exit', r))

  const second = await startProcess()
  const after = clientFor(second, token)
  const task = await waitForTask(after, sub.task_id, {
    until: (t) => ['completed', 'failed'].includes(t.status),
    timeout: 60_000,
  })
  if (task.status === 'completed') {
    expect(task.result?.text).toContain('finished after the crash')
  } else {
    expect(task.error?.code).toBe('CONTAINER_FAILED')
    expect(task.error?.error).toMatch(/restart/)
  }
  // No orphan: what the engine holds for this pool is exactly what the new server accounts for.
  await vi.waitFor(async () => {
    const engine = (await onEngine(runtime, pool)).map((c) => c.labels['berth.container']).sort()
    const pooled = (await clientFor(second, ADMIN_TOKEN).pool.containers.list()).containers
    expect(engine).toEqual(pooled.map((c) => c.id).sort())
    expect(pooled.every((c) => c.state === 'idle')).toBe(true)
  }, 20_000)
  // The task that was waiting in the queue survived the crash and ran.
  const later = await waitForTask(after, queued.task_id, { until: (t) => t.status === 'completed', timeout: 60_000 })
  expect(later.result?.text).toContain('ran after the restart')
  // A result read back after the restart counts in the caller's usage, as the queued task's does.
  const usage = await after.usage.get({ query: {} })
  expect(usage.total.tasks).toBe(task.status === 'completed' ? 2 : 1)
  const ws = await after.workspaces.get({ params: { id: task.workspace_id! } })
  expect(ws.status).toBe('idle')
  console.error(`[recovery] task ended ${task.status}${task.error ? ` (${task.error.error})` : ''}`)
})
