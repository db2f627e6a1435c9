/**
 * Every proxy Berth runs, fed malformed answers by a raw upstream on loopback (a fixed seed,
 * bounded counts): bad status lines (`099`, `600`, `abc`, none), reason phrases with control
 * characters, header names and values Node's parser refuses, truncated bodies and bad chunks,
 * slow answers, connections cut or reset mid-head and mid-body. Each proxy runs in a real
 * node:http server of this process, so a throw would be an uncaught exception here; after
 * every request the server still answers `/health`, and each proxied request got a sane copy
 * (status 200-599, Node's own reason phrase, no hop-by-hop header), a 502, or a head and then
 * a cut connection when the upstream's body was cut. The preview proxy is wired to the
 * upstream through a preview whose route is that port (the route itself is previews.test.ts').
 * The model gateway, behind fetch's parser, gets the answers that parser lets through.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http'
import { createServer as netServer, type Server as NetServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import type { Services } from '@berth/core'
import { silentLogger } from '@berth/core'
import { selfSignedCert } from '@berth/testkit/providers'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadOrCreateBrokerCa, type BrokerCa } from '../src/broker/broker-ca.js'
import { type EgressProxy, startEgressProxy } from '../src/broker/egress-proxy.js'
import { type GatewayGrant, type ModelGateway, startModelGateway } from '../src/broker/model-gateway.js'
import { createPreviewProxy } from '../src/preview-proxy.js'
import { exchange, type FuzzCase, fuzzCases, judge, type Outcome, rawUpstream } from './proxy-fuzz.helpers.js'

const SEED = 41
const TOKEN = 'fuzz-preview-token'
const dir = mkdtempSync(join(tmpdir(), 'berth-proxy-fuzz-'))
const cert = selfSignedCert({ dns: ['up.test'] })
const basic = `Basic ${Buffer.from('berth:tok-fuzz').toString('base64')}`
const closers: (() => Promise<unknown>)[] = []
let server: Server
let base: string
let proxy: EgressProxy
let ca: BrokerCa

/** A Node server that serves `/health` and the preview proxy to the upstream on `port`. */
async function startHost(port: () => number): Promise<void> {
  const services = {
    previews: {
      find: async (token: string) => (token === TOKEN ? { port: port() } : null),
      route: async () => ({ kind: 'here', target: { host: '127.0.0.1', port: port() } }),
    },
  } as unknown as Services
  const previews = createPreviewProxy({ services, logger: silentLogger })
  server = createServer((req, res) => {
    if (previews.matches(req)) return previews.request(req, res)
    res.writeHead(req.url === '/health' ? 200 : 404).end('ok')
  })
  server.on('upgrade', (req: IncomingMessage, socket, head) => previews.upgrade(req, socket, head))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  closers.push(() => new Promise((resolve) => server.close(resolve)))
}

const health = async () => (await fetch(`${base}/health`)).status

/** Run every case through `send`: the server answers `/health` after each, and no case is judged wrong. */
async function fuzz(cases: FuzzCase[], send: (c: FuzzCase) => Promise<Outcome>): Promise<void> {
  const wrong: string[] = []
  for (const c of cases) {
    wrong.push(...judge(c, await send(c)))
    expect(await health()).toBe(200)
  }
  expect(wrong).toEqual([])
  // The seed covers each outcome, so none of them is judged by default.
  const kinds = new Set(cases.map((c) => c.expect.kind))
  expect(kinds).toContain('copy')
  expect(kinds).toContain('bad-gateway')
  expect(kinds).toContain('cut')
}

let upstreamPort = 0
beforeAll(async () => startHost(() => upstreamPort))
afterAll(async () => {
  for (const close of closers.reverse()) await close()
  rmSync(dir, { recursive: true, force: true })
})

describe('the preview proxy', () => {
  const findings: FuzzCase[] = [
    {
      id: 0,
      label: 'FINDINGS 15: a reason phrase ending in \\x01',
      pieces: [Buffer.from('HTTP/1.1 200 OK\x01\r\ncontent-length: 2\r\n\r\nhi', 'latin1')],
      waitMs: 0,
      ending: 'end',
      expect: { kind: 'copy', status: 200, body: 'hi' },
    },
    {
      id: 1,
      label: 'FINDINGS 15: status 099',
      pieces: [Buffer.from('HTTP/1.1 099 OK\r\ncontent-length: 2\r\n\r\nhi', 'latin1')],
      waitMs: 0,
      ending: 'end',
      expect: { kind: 'bad-gateway' },
    },
  ]

  it("copies a reason phrase with a control character as Node's own, and answers 502 for status 099", async () => {
    const up = await rawUpstream(findings)
    upstreamPort = up.port
    try {
      for (const c of findings) {
        const o = await exchange({ host: '127.0.0.1', port: new URL(base).port, path: `/preview/${TOKEN}/c/${c.id}` })
        expect(judge(c, o)).toEqual([])
        expect(await health()).toBe(200)
      }
    } finally {
      await up.close()
    }
  })

  it('HTTP: 120 malformed answers, each a sane copy, a 502 or a cut body, while /health answers', async () => {
    const cases = fuzzCases(SEED, 120)
    const up = await rawUpstream(cases)
    upstreamPort = up.port
    try {
      await fuzz(cases, (c) =>
        exchange({ host: '127.0.0.1', port: new URL(base).port, path: `/preview/${TOKEN}/c/${c.id}` }),
      )
    } finally {
      await up.close()
    }
  }, 60_000)

  it('upgrades: 60 malformed answers to a request to switch, or a switch to an echo', async () => {
    const cases = fuzzCases(SEED + 1, 60, true)
    expect(cases.some((c) => c.expect.kind === 'switch')).toBe(true)
    const up = await rawUpstream(cases)
    upstreamPort = up.port
    try {
      await fuzz(cases, (c) =>
        exchange({ host: '127.0.0.1', port: new URL(base).port, path: `/preview/${TOKEN}/c/${c.id}` }, true),
      )
    } finally {
      await up.close()
    }
  }, 60_000)
})

describe('the egress proxy', () => {
  beforeAll(async () => {
    ca = await loadOrCreateBrokerCa(join(dir, 'ca'))
    proxy = await startEgressProxy({
      socketPath: join(dir, 'proxy.sock'),
      ca,
      // A brokered secret for up.test: its tunnels are intercepted, so the proxy reads the answers there too.
      authorize: async (token) =>
        token === 'tok-fuzz'
          ? {
              task_id: 'task_fuzz',
              egress: { policy: 'allowlist', allow: [{ host: 'up.test' }], allowPrivate: true },
              brokered: [{ placeholder: 'berth_brokered_sec_fuzz', value: 'fuzz-secret', hosts: ['up.test'] }],
              git: [],
            }
          : null,
      upstreamCa: [cert.cert],
      lookup: async (host) => (host === 'up.test' ? ['127.0.0.1'] : []),
    })
    closers.push(() => proxy.close())
  })

  it('plain http://: 120 malformed answers, each a sane copy, a 502 or a cut body', async () => {
    const cases = fuzzCases(SEED + 2, 120)
    const up = await rawUpstream(cases)
    try {
      await fuzz(cases, (c) =>
        exchange({
          socketPath: proxy.socketPath,
          path: `http://up.test:${up.port}/c/${c.id}`,
          headers: { host: `up.test:${up.port}`, 'proxy-authorization': basic },
        }),
      )
    } finally {
      await up.close()
    }
  }, 60_000)

  /** A CONNECT tunnel to up.test, TLS inside it (the proxy intercepts: a leaf of its CA), then one request. */
  const intercepted = (port: number, c: FuzzCase, upgrade: boolean) =>
    new Promise<Outcome>((resolve) => {
      const connect = httpRequest({
        socketPath: proxy.socketPath,
        method: 'CONNECT',
        path: `up.test:${port}`,
        headers: { 'proxy-authorization': basic },
      })
      connect.on('error', (err: NodeJS.ErrnoException) => resolve({ kind: 'error', code: `CONNECT ${err.code}` }))
      connect.on('connect', (res, socket) => {
        if (res.statusCode !== 200) return resolve({ kind: 'error', code: `CONNECT ${res.statusCode}` })
        const tls = tlsConnect({ socket, servername: 'up.test', ca: [ca.certPem] })
        tls.on('error', (err: NodeJS.ErrnoException) => resolve({ kind: 'error', code: `TLS ${err.code}` }))
        tls.on('secureConnect', () =>
          resolve(
            exchange(
              { createConnection: () => tls, path: `/c/${c.id}`, headers: { host: `up.test:${port}` } },
              upgrade,
            ),
          ),
        )
      })
      connect.end()
    })

  it('intercepted HTTPS: 50 malformed answers, each a sane copy, a 502 or a cut body', async () => {
    const cases = fuzzCases(SEED + 3, 50)
    const up = await rawUpstream(cases, cert)
    try {
      await fuzz(cases, (c) => intercepted(up.port, c, false))
    } finally {
      await up.close()
    }
  }, 60_000)

  it('intercepted upgrades: 40 malformed answers to a request to switch, or a switch to an echo', async () => {
    const cases = fuzzCases(SEED + 4, 40, true)
    const up = await rawUpstream(cases, cert)
    try {
      await fuzz(cases, (c) => intercepted(up.port, c, true))
    } finally {
      await up.close()
    }
  }, 60_000)
})

describe('the model gateway', () => {
  // fetch's parser reads some answers Node's refuses (a space before a header's colon), and
  // passes statuses up to 999: the gateway's copy checks both.
  const answers: [label: string, bytes: string, status: number][] = [
    ['status 600', 'HTTP/1.1 600 High\r\ncontent-length: 2\r\n\r\nhi', 502],
    ['status 999', 'HTTP/1.1 999 Max\r\ncontent-length: 2\r\n\r\nhi', 502],
    ['status 099', 'HTTP/1.1 099 Low\r\ncontent-length: 2\r\n\r\nhi', 502],
    ['a header name ending in a space', 'HTTP/1.1 200 OK\r\nx-odd : 1\r\ncontent-length: 2\r\n\r\nhi', 200],
    ['a reason phrase with \\x01', 'HTTP/1.1 200 OK\x01\r\ncontent-length: 2\r\n\r\nhi', 200],
  ]
  let current = ''
  let gateway: ModelGateway
  let upstream: NetServer

  beforeAll(async () => {
    upstream = netServer((s) => {
      s.on('error', () => {})
      let head = ''
      s.on('data', (d: Buffer) => {
        head += d.toString('latin1')
        const end = head.indexOf('\r\n\r\n')
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0)
        if (end >= 0 && head.length >= end + 4 + length) s.end(Buffer.from(current, 'latin1'))
      })
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const base_url = `http://127.0.0.1:${(upstream.address() as { port: number }).port}`
    const grant = {
      task_id: 'task_fuzz',
      owner_id: 'usr_fuzz',
      profile_id: 'prof_fuzz',
      upstream: { base_url, api_key: 'k' },
    }
    gateway = await startModelGateway({
      socketPath: join(dir, 'gateway.sock'),
      authorize: async (token) =>
        token === 'btk_fuzz'
          ? ({ ...grant, allowed_models: null, max_budget_usd: null, monthly_limits: [] } as GatewayGrant)
          : null,
    })
    closers.push(
      () => gateway.close(),
      () => new Promise((resolve) => upstream.close(resolve)),
    )
  })

  it('answers 502 for a status outside 200-599, and drops a header Node would refuse to write', async () => {
    for (const [label, bytes, status] of answers) {
      current = bytes
      const o = await exchange(
        {
          socketPath: gateway.socketPath,
          method: 'POST',
          path: '/v1/messages',
          headers: { 'x-api-key': 'btk_fuzz', 'content-type': 'application/json' },
        },
        false,
        JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 1, messages: [] }),
      )
      expect(o.kind === 'response' && [o.status, o.complete], label).toEqual([status, true])
      if (o.kind === 'response')
        expect(
          o.headers.map((h) => h.toLowerCase()),
          label,
        ).not.toContain('x-odd ')
      expect(await health()).toBe(200)
    }
  })
})
