/**
 * The last-resort guard (`guardUncaught`), in a process of its own (the test runner has
 * uncaught-exception handlers of its own): Node's own error about one connection, thrown in a
 * socket callback during a request, is logged and counted and ends that connection while the
 * server keeps serving; a bug, an unhandled rejection, or a connection error thrown outside
 * any request still end the process with code 1, as Node would. The rule is documented.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { fileURLToPath } from 'node:url'
import { afterAll, expect, it, vi } from 'vitest'

const script = fileURLToPath(new URL('./fixtures/guarded-server.ts', import.meta.url))
const ADMIN_TOKEN = 'operator-token-crash-guard'
const children: ChildProcess[] = []

interface Guarded {
  url: string
  output(): string
  /** The exit code once the process is gone. */
  exited: Promise<number | null>
}

function start(): Promise<Guarded> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, ADMIN_TOKEN },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.push(child)
  let out = ''
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString()
      const m = /listening (\d+)/.exec(out)
      if (m) resolve({ url: `http://127.0.0.1:${m[1]}`, output: () => out, exited })
    })
    void exited.then((code) => reject(new Error(`the server exited (${code}) before listening:\n${out}`)))
  })
}

afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL')
})

/** A request whose connection may be cut: its status, or the client's error code. */
const attempt = (url: string) =>
  fetch(url).then(
    (r) => r.status,
    (err: Error & { cause?: { code?: string } }) => err.cause?.code ?? err.message,
  )

it('contains ERR_INVALID_CHAR thrown in an upstream socket callback during a request: logged, counted, still serving', async () => {
  const s = await start()
  // The connection of the request that threw is ended: no answer, and no 500 either.
  expect(typeof (await attempt(`${s.url}/naive`))).toBe('string')
  // The log line comes through the child's stderr pipe, maybe after the client saw the cut.
  await vi.waitFor(() =>
    expect(s.output()).toContain('berth: contained an uncaught ERR_INVALID_CHAR while serving a request'),
  )
  expect(s.output()).toContain('TypeError [ERR_INVALID_CHAR]: Invalid character in statusMessage')
  expect((await fetch(`${s.url}/health`)).status).toBe(200)
  expect(typeof (await attempt(`${s.url}/naive`))).toBe('string')
  const metrics = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  expect(await metrics.text()).toContain('berth_uncaught_errors_total{context="request"} 2')
  expect((await fetch(`${s.url}/health`)).status).toBe(200)
})

it.each([
  [
    '/bug',
    'uncaught exception (uncaughtException, while serving a request, not a connection error): exiting',
    'TypeError: a bug in a handler',
  ],
  ['/reject', 'uncaught exception (unhandledRejection, outside any connection): exiting', 'a rejection nobody awaited'],
  [
    '/outside',
    'uncaught exception (uncaughtException, outside any connection): exiting',
    'a reset outside any request',
  ],
])('%s: anything else still ends the process with code 1, its stack logged', async (path, line, error) => {
  const s = await start()
  await attempt(`${s.url}${path}`)
  expect(await s.exited).toBe(1)
  expect(s.output()).toContain(`berth: ${line}`)
  expect(s.output()).toContain(error)
})

it('a marked server is otherwise unchanged: a CONNECT it has no handler for is still closed at once', async () => {
  const s = await start()
  const { hostname, port } = new URL(s.url)
  const outcome = await new Promise<string>((resolve) => {
    const req = httpRequest({ host: hostname, port, method: 'CONNECT', path: 'example.test:443' })
    req.on('connect', () => resolve('connected'))
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message))
    // A guard that took the CONNECT without answering it would leave it open.
    req.setTimeout(10_000, () => {
      req.destroy()
      resolve('no answer within 10 s')
    })
    req.end()
  })
  expect(outcome).toBe('ECONNRESET')
  expect((await fetch(`${s.url}/health`)).status).toBe(200)
})

it('docs/OPERATIONS.md states when the guard contains an exception and when it exits', () => {
  const doc = readFileSync(new URL('../../../docs/OPERATIONS.md', import.meta.url), 'utf8')
  const section = /## Uncaught exceptions\n([\s\S]*?)\n## /.exec(doc)?.[1] ?? ''
  for (const term of ['guardUncaught', 'berth_uncaught_errors_total', 'ERR_INVALID_CHAR', 'unhandled', 'code 1'])
    expect(section).toContain(term)
})
