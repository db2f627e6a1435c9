/**
 * Previews on the `local` runtime (bubblewrap sandbox, which shares the host's network): the
 * agent's server on a port of the sandbox is reached through the preview URL, over HTTP and
 * WebSocket, and a revoked link is 404. Each exec is its own bubblewrap PID namespace, so the
 * server lives while the task that started it runs: the agent's Bash call holds it.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { startServer, waitForTask, type TestServer } from './helpers.js'
import { onEngine, uniquePoolName } from './pool.helpers.js'
import { echoOverWebSocket, serveInContainer } from './previews.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { freePort } from './standalone.helpers.js'
import { agentUser } from './tasks.helpers.js'

const baseDir = mkdtempSync(join(tmpdir(), 'berth-local-previews-'))
const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'bwrap' })
const pool = uniquePoolName('local-previews')
let s: TestServer

beforeAll(async () => {
  s = await startServer({
    runtime,
    pool: { image: 'local', min: 0, max: 2, name: pool },
    runner: { bundleDir: RUNNER_BUNDLE },
    sessionIdleMs: 600_000,
  })
  await s.berth.ready
}, 120_000)

afterAll(async () => {
  await s?.close()
  const left = await onEngine(runtime, pool)
  await Promise.all(left.map((c) => runtime.remove(c.id)))
  rmSync(baseDir, { recursive: true, force: true })
})

describe('previews on local (bwrap)', () => {
  it("reaches the sandbox's port over HTTP and WebSocket until revoked", async () => {
    const t = await agentUser(s, { waitMs: 90_000 })
    // The sandbox shares the host's network: a port nothing else on this host uses.
    const port = await freePort()
    const sub = await t.submit({ mode: 'session', prompt: serveInContainer(port) })
    const wsId = sub.workspace_id!
    // The task ends with its turn; the session's living agent keeps the server it started running.
    const task = await waitForTask(t.api, sub.task_id, { timeout: 120_000, interval: 250 })
    expect(task.status, JSON.stringify(task.error)).toBe('completed')
    expect((await t.api.workspaces.get({ params: { id: wsId } })).agent?.background).toHaveLength(1)
    const p = await t.api.workspaces.previews.create({ params: { id: wsId }, body: { port } })
    await vi.waitFor(async () => expect((await fetch(`${p.url}x`)).status).toBe(200), {
      timeout: 60_000,
      interval: 250,
    })
    expect(await (await fetch(`${p.url}x`)).text()).toBe('hello GET /x auth= body=')
    expect(await echoOverWebSocket(`${p.url.replace(/^http/, 'ws')}ws`, 'local')).toBe('echo:local')
    await t.api.workspaces.previews.revoke({ params: { id: wsId, preview_id: p.id } })
    expect((await fetch(p.url)).status).toBe(404)
    // Stopped: the agent and its server go with the sandbox.
    const p2 = await t.api.workspaces.previews.create({ params: { id: wsId }, body: { port } })
    expect((await fetch(`${p2.url}x`)).status).toBe(200)
    expect(await t.api.workspaces.stop({ params: { id: wsId } })).toMatchObject({ status: 'idle', agent: null })
    expect((await fetch(`${p2.url}x`)).status).not.toBe(200)
  }, 180_000)
})
