/**
 * Egress from the local runtime's sandbox (issue 29): the sandbox has only its own loopback,
 * so the one way out is the broker's egress proxy, reached through its unix socket mounted
 * in (as the runner forwards it); the proxy applies the task's policy by name. A host
 * listener stays out of direct reach whatever the policy.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer as httpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { collectExec, silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadOrCreateBrokerCa } from '../src/broker/broker-ca.js'
import { type EgressProxy, type ProxyGrant, startEgressProxy } from '../src/broker/egress-proxy.js'

const dir = mkdtempSync(join(tmpdir(), 'berth-local-egress-'))
mkdirSync(join(dir, 'broker'))
const rt = localRuntime({ baseDir: join(dir, 'containers'), logger: silentLogger, sandbox: 'bwrap' })
let fake: ReturnType<typeof httpServer>
let port: number
let proxy: EgressProxy
let id: string

beforeAll(async () => {
  fake = httpServer((_req, res) => res.end('fake-upstream'))
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', () => r()))
  port = (fake.address() as AddressInfo).port
  const grants: Record<string, ProxyGrant> = {
    'tok-allow': {
      task_id: 'task_allow',
      egress: { policy: 'allowlist', allow: [{ host: 'allowed.test' }], allowPrivate: true },
      brokered: [],
      git: [],
    },
    'tok-public': { task_id: 'task_public', egress: { policy: 'public' }, brokered: [], git: [] },
    'tok-none': { task_id: 'task_none', egress: { policy: 'none' }, brokered: [], git: [] },
  }
  proxy = await startEgressProxy({
    socketPath: join(dir, 'broker', 'proxy.sock'),
    ca: await loadOrCreateBrokerCa(join(dir, 'ca')),
    authorize: async (token) => grants[token] ?? null,
    lookup: async (host) => (host.endsWith('.test') ? ['127.0.0.1'] : []),
  })
  // Created with the public policy, as the pool does for such an environment.
  ;({ id } = await rt.create({
    image: 'local',
    workingDir: '/workspace',
    egress: { policy: 'public' },
    mounts: [{ type: 'bind', source: join(dir, 'broker'), target: '/run/berth-broker', readOnly: true }],
  }))
  await rt.start(id)
}, 60_000)

afterAll(async () => {
  if (id) await rt.remove(id)
  await proxy?.close()
  await new Promise((r) => fake?.close(r))
  rmSync(dir, { recursive: true, force: true })
})

/** From inside the sandbox: a plain request through the proxy's socket with `token`, and a direct one. */
async function fromSandbox(token: string): Promise<{ viaProxy: string; direct: string }> {
  const script = `const http = require('http')
    const auth = 'Basic ' + Buffer.from('berth:${token}').toString('base64')
    const show = (req, done) => req.on('response', (r) => { let b = ''; r.on('data', (c) => (b += c)); r.on('end', () => done(r.statusCode + ' ' + b)) })
      .on('error', (e) => done('error ' + e.code)).end()
    show(http.request({ socketPath: '/run/berth-broker/proxy.sock', path: 'http://allowed.test:${port}/',
      headers: { host: 'allowed.test:${port}', 'proxy-authorization': auth } }), (viaProxy) =>
      show(http.request({ host: '127.0.0.1', port: ${port}, path: '/' }), (direct) =>
        console.log(JSON.stringify({ viaProxy, direct }))))`
  const r = await collectExec(await rt.exec(id, { cmd: ['node', '-e', script] }))
  expect(r.exitCode).toBe(0)
  return JSON.parse(r.stdout) as { viaProxy: string; direct: string }
}

describe('egress from the local sandbox', () => {
  it('accepts every policy: its only way out is the proxy', () => {
    expect(rt.capabilities.egress).toEqual(['none', 'public', 'allowlist'])
  })

  it('reaches the local fake through the proxy only when the task’s policy allows it; never directly', async () => {
    expect(await fromSandbox('tok-allow')).toEqual({ viaProxy: '200 fake-upstream', direct: 'error ECONNREFUSED' })
    // `public` refuses private addresses (the fake is on loopback); `none` refuses all.
    expect((await fromSandbox('tok-public')).viaProxy).toMatch(/^403 /)
    expect(await fromSandbox('tok-none')).toMatchObject({ viaProxy: expect.stringMatching(/^403 /) })
    expect((await fromSandbox('tok-none')).direct).toBe('error ECONNREFUSED')
  }, 60_000)
})
