/**
 * The standalone server's shutdown, as an operator sees it: a real child process on Docker,
 * SIGTERM with WebSocket clients connected (idle, streaming a running task, and one that
 * never answers the close handshake). Also: every data dir shares one runner bundle.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import WebSocket from 'ws'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { findRepoRoot } from '@berth/testkit'
import { newCaller, TERMINAL } from '../../../bench/soak/api.js'
import { startStandalone, tail, type Standalone } from '../../../bench/soak/standalone.js'
import { engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'

const ADMIN = 'shutdown-test-admin-token-0123456789'
const { info, runtime } = engineRuntime('docker')
const pool = uniquePoolName('shutdown')
const dirs: string[] = []
const cacheDir = join(findRepoRoot(), '.tmp', 'berth-cache')

function env(dataDir: string): Record<string, string> {
  return {
    BERTH_DATA_DIR: dataDir,
    BERTH_ADMIN_TOKEN: ADMIN,
    BERTH_RUNTIME: 'docker',
    BERTH_IMAGE: info.image,
    BERTH_POOL_MIN: '1',
    BERTH_POOL_NAME: pool,
    BERTH_RATE_RPM: '100000',
    BERTH_RATE_BURST: '10000',
    BERTH_CACHE_DIR: cacheDir,
  }
}

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'berth-shutdown-'))
  dirs.push(dir)
  return dir
}

/** Resolves with the close code the client saw. */
function closed(ws: WebSocket): Promise<number> {
  return new Promise((resolve) => ws.once('close', (code) => resolve(code)))
}

/** A client that upgrades, then never reads or answers anything (the close handshake included). */
async function deafClient(url: string, token: string): Promise<{ upgraded: Promise<void> }> {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  socket.on('error', () => {})
  await new Promise<void>((r) => socket.once('connect', () => r()))
  socket.write(
    `GET /v1/ws HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${token}\r\n\r\n`,
  )
  const upgraded = new Promise<void>((resolve, reject) =>
    socket.once('data', (d) => (String(d).startsWith('HTTP/1.1 101') ? resolve() : reject(new Error(String(d))))),
  )
  return { upgraded: upgraded.then(() => void socket.pause()) }
}

afterAll(async () => {
  await sweep(runtime, pool)
  for (const v of await runtime.listVolumes({ labels: { 'berth.pool': pool } })) await runtime.removeVolume(v.name)
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
  await runtime.close?.()
})

describe('standalone server shutdown', () => {
  let first: Standalone | undefined

  afterAll(() => {
    if (first && first.child.exitCode === null) first.child.kill('SIGKILL')
  })

  it('SIGTERM closes idle and streaming WebSocket clients with 1001 and exits within the grace, whatever clients do; the running task is recovered at the next start', async () => {
    const dir = dataDir()
    first = await startStandalone(env(dir))
    const { api, profileId } = await newCaller(first.url, ADMIN)
    const sub = await api.call('POST', '/v1/tasks', {
      mode: 'batch',
      profile_id: profileId,
      prompt: 'Work slowly [[berth:slow 150]] [[berth:turns 2]] [[berth:text finished after the restart]]',
    })
    expect(sub.status, JSON.stringify(sub.body)).toBe(202)
    const taskId = sub.body.task_id as string

    const wsUrl = `${first.url.replace('http', 'ws')}/v1/ws`
    const idle = new WebSocket(wsUrl, { headers: { authorization: `Bearer ${api.token}` } })
    const streaming = new WebSocket(wsUrl, { headers: { authorization: `Bearer ${api.token}` } })
    await Promise.all([idle, streaming].map((ws) => new Promise((r, j) => ws.once('open', r).once('error', j))))
    const idleClosed = closed(idle)
    const streamingClosed = closed(streaming)
    // Streaming: the task's events are arriving on this socket when the signal comes.
    const streamed = new Promise<void>((resolve) =>
      streaming.on('message', (raw) => {
        const m = JSON.parse(String(raw)) as { type: string; event?: { type: string } }
        if (m.type === 'task.event' && m.event?.type === 'token') resolve()
      }),
    )
    streaming.send(JSON.stringify({ type: 'subscribe', task_id: taskId }))
    await streamed
    const deaf = await deafClient(first.url, api.token)
    await deaf.upgraded

    first.child.kill('SIGTERM')
    // Bounded, not timed: without the fix the process never exits while clients stay.
    const exit = await Promise.race([first.exited, new Promise((r) => setTimeout(() => r('still running'), 20_000))])
    expect(exit, tail(first.lines)).toEqual({ code: 0, signal: null })
    expect(await idleClosed).toBe(1001)
    expect(await streamingClosed).toBe(1001)
    const out = first.lines.map((l) => l.text)
    expect(out).toContain('stopped')
    expect(out.some((l) => l.includes('did not finish within the grace'))).toBe(false)

    // The task was left to recovery: the next start gives it a definite end.
    const second = await startStandalone(env(dir))
    try {
      api.url = second.url
      const task = await vi.waitFor(
        async () => {
          const t = await api.call('GET', `/v1/tasks/${taskId}`)
          expect(TERMINAL, 'the interrupted task to end').toContain(t.body.status)
          return t.body
        },
        { timeout: 90_000, interval: 200 },
      )
      if (task.status === 'failed') expect(task.error.code).toBe('CONTAINER_FAILED')
      else expect(task).toMatchObject({ status: 'completed', result: { text: 'finished after the restart' } })
    } finally {
      second.child.kill('SIGTERM')
      expect(await second.exited).toEqual({ code: 0, signal: null })
    }
  })

  it('every data dir shares one runner bundle: a second data dir adds none, and data dirs hold data only', async () => {
    const bundles = () => (existsSync(join(cacheDir, 'runner')) ? readdirSync(join(cacheDir, 'runner')).sort() : [])
    const a = dataDir()
    const b = dataDir()
    const mounted: string[] = []
    let afterFirst: string[] = []
    for (const dir of [a, b]) {
      const s = await startStandalone(env(dir))
      mounted.push(s.lines.find((l) => l.text.startsWith('Runner bundle: '))!.text.slice('Runner bundle: '.length))
      s.child.kill('SIGTERM')
      await s.exited
      if (dir === a) afterFirst = bundles()
      else expect(bundles()).toEqual(afterFirst)
      expect(readdirSync(dir)).not.toContain('runner')
    }
    expect(mounted[0]).toBe(mounted[1])
    expect(mounted[0]!.startsWith(join(cacheDir, 'runner'))).toBe(true)
    expect(existsSync(join(mounted[0]!, 'main.js'))).toBe(true)
  })
})
