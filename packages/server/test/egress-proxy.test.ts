import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import {
  request as httpRequest,
  createServer as httpServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http'
import type { Duplex } from 'node:stream'
import { request as httpsRequest, createServer as httpsServer } from 'node:https'
import { type AddressInfo, connect as netConnect, createServer as netServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import { promisify } from 'node:util'
import { type FakeGitServer, selfSignedCert, startFakeGitServer } from '@berth/testkit/providers'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type BrokerCa, loadOrCreateBrokerCa } from '../src/broker/broker-ca.js'
import { hostMatches, secretHostMatches } from '../src/broker/proxy-grant.js'
import { checkDestination } from '../src/broker/proxy-policy.js'
import { type EgressProxy, type ProxyGrant, startEgressProxy } from '../src/broker/egress-proxy.js'

const SECRET = 'sk-live-brokered-0123456789'
const PLACEHOLDER = 'berth_brokered_sec_abc123'
const GIT_TOKEN = 'gho_gittoken_987654321'
const NAMES = ['allowed.test', 'other.test', 'git.test', 'untrusted.test', 'outside.test']

const BIG_CHUNK = 'x'.repeat(32 * 1024)

interface Seen {
  host: string | undefined
  headers: IncomingHttpHeaders
}

const dir = mkdtempSync(join(tmpdir(), 'berth-egress-'))
const testCert = selfSignedCert({ dns: NAMES, ips: ['127.0.0.1'] })
// A second upstream whose certificate the proxy does not trust.
const strangerCert = selfSignedCert({ dns: ['untrusted.test'] })
// The Git host has a private CA of its own, trusted through the account's ca_pem only.
const gitCert = selfSignedCert({ dns: ['git.test'] })
const seen: Seen[] = []
const connections = { https: 0 }
const warnings: unknown[] = []
let ca: BrokerCa
let proxy: EgressProxy
let httpsPort: number
let strangerPort: number
let plainPort: number
let forwarder: Server
let forwarderPort: number
let gitHost: FakeGitServer
const closers: (() => void)[] = []

function record(req: IncomingMessage, res: ServerResponse) {
  seen.push({ host: req.headers.host, headers: req.headers })
  // Echoes what it received, as some APIs do in errors: the proxy must not show it to the agent.
  res.setHeader('x-echo-authorization', req.headers.authorization ?? '')
  // A long answer in many writes, as a download streams.
  if (req.url === '/big') {
    for (let i = 0; i < 64; i++) res.write(BIG_CHUNK)
    res.end()
  } else res.end('ok')
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  closers.push(() => server.close())
  return (server.address() as AddressInfo).port
}

function grants(): Record<string, ProxyGrant> {
  const allowAll: ProxyGrant['egress'] = {
    policy: 'allowlist',
    allow: [
      { host: 'allowed.test', ports: [httpsPort, plainPort] },
      ...['other.test', 'git.test', 'untrusted.test'].map((host) => ({ host })),
    ],
    allowPrivate: true,
  }
  const brokered = [{ placeholder: PLACEHOLDER, value: SECRET, hosts: ['allowed.test', 'untrusted.test'] }]
  const git = [
    { host: `git.test:${httpsPort}`, username: 'x-access-token', token: GIT_TOKEN },
    { host: `git.test:${gitHost.port}`, username: 'x-access-token', token: GIT_TOKEN, ca_pem: gitCert.cert },
  ]
  return {
    'tok-allow': { task_id: 'task_allow', egress: allowAll, brokered, git },
    'tok-none': { task_id: 'task_none', egress: { policy: 'none' }, brokered, git },
    'tok-public': { task_id: 'task_public', egress: { policy: 'public' }, brokered, git },
  }
}

const basic = (token: string) => `Basic ${Buffer.from(`berth:${token}`).toString('base64')}`

beforeAll(async () => {
  const upstream = httpsServer({ key: testCert.key, cert: testCert.cert }, record)
  upstream.on('secureConnection', () => connections.https++)
  // An echo protocol behind an upgrade, as a WebSocket server would switch to.
  upstream.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    seen.push({ host: req.headers.host, headers: req.headers })
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n')
    socket.pipe(socket)
  })
  httpsPort = await listen(upstream)
  const stranger = httpsServer({ key: strangerCert.key, cert: strangerCert.cert }, record)
  strangerPort = await listen(stranger)
  plainPort = await listen(httpServer(record))
  gitHost = await startFakeGitServer({ tls: gitCert, authorize: (_user, password) => password === GIT_TOKEN })
  closers.push(() => void gitHost.close())
  gitHost.createRepo('demo', { 'README.md': '# Demo through the proxy\n' })
  ca = await loadOrCreateBrokerCa(join(dir, 'ca'))
  const table = grants()
  proxy = await startEgressProxy({
    socketPath: join(dir, 'proxy.sock'),
    ca,
    authorize: async (token) => table[token] ?? null,
    upstreamCa: [testCert.cert],
    lookup: async (host) => (host.endsWith('.test') ? ['127.0.0.1'] : []),
    logger: { warn: (msg, fields) => warnings.push([msg, fields]) },
  })
  // What the runner does in a container: a loopback port forwarded to the proxy's socket.
  forwarder = netServer((client: Socket) => {
    const upstreamSocket = netConnect(proxy.socketPath)
    client.pipe(upstreamSocket).pipe(client)
    client.on('error', () => upstreamSocket.destroy())
    upstreamSocket.on('error', () => client.destroy())
  })
  forwarderPort = await listen(forwarder)
})

afterAll(async () => {
  await proxy?.close()
  for (const close of closers) close()
  rmSync(dir, { recursive: true, force: true })
})

interface Answer {
  /** The proxy's answer to CONNECT. */
  connect: number
  status?: number
  body?: string
  /** Common name of the issuer of the certificate the client was shown. */
  issuer?: string
  echoed?: string
}

/** An HTTPS request through the proxy's socket, as a client in the container makes it. */
function viaProxy(
  token: string | null,
  host: string,
  port: number,
  headers: Record<string, string> | string[] = {},
  path = '/',
) {
  return tlsThroughProxy(token, host, port).then(
    ({ connect, tls }) =>
      new Promise<Answer>((resolve, reject) => {
        if (!tls) return resolve({ connect })
        const issuer = String(tls.getPeerCertificate().issuer.CN)
        const req = httpsRequest({ host, port, path, headers, createConnection: () => tls })
        req.on('error', reject)
        req.on('response', (r) => {
          let body = ''
          r.on('data', (c) => (body += c))
          const echoed = r.headers['x-echo-authorization'] as string | undefined
          r.on('end', () => resolve({ connect, status: r.statusCode, body, issuer, echoed }))
        })
        req.end()
      }),
  )
}

/** CONNECT through the proxy's socket, then TLS inside the tunnel (when the proxy said 200). */
function tlsThroughProxy(token: string | null, host: string, port: number) {
  return new Promise<{ connect: number; tls?: TLSSocket }>((resolve, reject) => {
    const proxyHeaders: Record<string, string> = token ? { 'proxy-authorization': basic(token) } : {}
    const connect = httpRequest({
      socketPath: proxy.socketPath,
      method: 'CONNECT',
      path: `${host}:${port}`,
      headers: proxyHeaders,
    })
    connect.on('error', reject)
    connect.on('connect', (res, socket) => {
      if (res.statusCode !== 200) {
        socket.destroy()
        return resolve({ connect: res.statusCode ?? 0 })
      }
      const tls = tlsConnect({ socket, servername: host, ca: [ca.certPem, testCert.cert] })
      tls.on('error', reject)
      tls.on('secureConnect', () => resolve({ connect: 200, tls }))
    })
    connect.end()
  })
}

/** A plain `http://` request in absolute form through the proxy. */
function plainViaProxy(token: string, host: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest({
      socketPath: proxy.socketPath,
      path: `http://${host}:${plainPort}/plain`,
      headers: { host: `${host}:${plainPort}`, 'proxy-authorization': basic(token), ...headers },
    })
    req.on('error', reject)
    req.on('response', (r) => {
      let body = ''
      r.on('data', (c) => (body += c))
      r.on('end', () => resolve({ status: r.statusCode ?? 0, body }))
    })
    req.end()
  })
}

const lastSeen = () => seen[seen.length - 1]!

describe('brokered secrets', () => {
  it('an allowed host receives the real value in place of the placeholder, in any header', async () => {
    const answer = await viaProxy('tok-allow', 'allowed.test', httpsPort, {
      authorization: `Bearer ${PLACEHOLDER}`,
      'x-api-key': `key=${PLACEHOLDER};`,
    })
    expect(answer).toMatchObject({ connect: 200, status: 200, body: 'ok' })
    // The client was shown a certificate of the broker CA: the proxy read the request.
    expect(answer.issuer).toMatch(/^Berth egress broker CA/)
    expect(lastSeen().host).toBe(`allowed.test:${httpsPort}`)
    expect(lastSeen().headers.authorization).toBe(`Bearer ${SECRET}`)
    expect(lastSeen().headers['x-api-key']).toBe(`key=${SECRET};`)
    expect(lastSeen().headers['proxy-authorization']).toBeUndefined()
    // The upstream echoed the value in a response header: the client sees the placeholder.
    expect(answer.echoed).toBe(`Bearer ${PLACEHOLDER}`)
  })

  it('a host the secret does not list receives only the placeholder, and its tunnel is not intercepted', async () => {
    const answer = await viaProxy('tok-allow', 'other.test', httpsPort, { authorization: `Bearer ${PLACEHOLDER}` })
    expect(answer).toMatchObject({ connect: 200, status: 200 })
    // The upstream's own certificate: the bytes passed through untouched.
    expect(answer.issuer).toBe('berth-fake-git')
    expect(lastSeen().host).toBe(`other.test:${httpsPort}`)
    expect(lastSeen().headers.authorization).toBe(`Bearer ${PLACEHOLDER}`)
  })

  it('an intercepted host not listed by the secret keeps the placeholder too (git.test has only a Git account)', async () => {
    await viaProxy('tok-allow', 'git.test', httpsPort, { 'x-api-key': PLACEHOLDER })
    expect(lastSeen().host).toBe(`git.test:${httpsPort}`)
    expect(lastSeen().headers['x-api-key']).toBe(PLACEHOLDER)
  })

  it('a plain http:// request gets the same rewriting, for the allowed host only', async () => {
    expect(await plainViaProxy('tok-allow', 'allowed.test', { authorization: `Bearer ${PLACEHOLDER}` })).toEqual({
      status: 200,
      body: 'ok',
    })
    expect(lastSeen().headers.authorization).toBe(`Bearer ${SECRET}`)
    expect(lastSeen().headers['proxy-authorization']).toBeUndefined()
    await plainViaProxy('tok-allow', 'other.test', { authorization: `Bearer ${PLACEHOLDER}` })
    expect(lastSeen().host).toBe(`other.test:${plainPort}`)
    expect(lastSeen().headers.authorization).toBe(`Bearer ${PLACEHOLDER}`)
  })

  it('an upstream whose certificate is not trusted gets nothing, and no secret reaches a log line', async () => {
    const before = seen.length
    const answer = await viaProxy('tok-allow', 'untrusted.test', strangerPort, {
      authorization: `Bearer ${PLACEHOLDER}`,
    })
    expect(answer.status).toBe(502)
    expect(answer.body).not.toContain(SECRET)
    expect(seen.length).toBe(before)
    expect(warnings.length).toBeGreaterThan(0)
    const logged = JSON.stringify(warnings)
    expect(logged).not.toContain(SECRET)
    expect(logged).not.toContain(GIT_TOKEN)
  })

  it('a request for another name inside an intercepted tunnel is refused', async () => {
    const before = seen.length
    const answer = await viaProxy('tok-allow', 'allowed.test', httpsPort, {
      host: `other.test:${httpsPort}`,
      authorization: `Bearer ${PLACEHOLDER}`,
    })
    expect(answer.status).toBe(421)
    expect(seen.length).toBe(before)
  })

  it('an absolute URL or a second Host header inside an intercepted tunnel is refused', async () => {
    const before = seen.length
    const twoHosts = [
      'Host',
      `allowed.test:${httpsPort}`,
      'Host',
      `other.test:${httpsPort}`,
      'Authorization',
      PLACEHOLDER,
    ]
    expect((await viaProxy('tok-allow', 'allowed.test', httpsPort, twoHosts)).status).toBe(400)
    const { tls } = await tlsThroughProxy('tok-allow', 'allowed.test', httpsPort)
    tls!.write(
      `GET https://other.test:${httpsPort}/ HTTP/1.1\r\nHost: allowed.test:${httpsPort}\r\nAuthorization: ${PLACEHOLDER}\r\n\r\n`,
    )
    const head = await new Promise<string>((resolve) => tls!.once('data', (chunk) => resolve(String(chunk))))
    tls!.destroy()
    expect(head).toMatch(/^HTTP\/1\.1 400 /)
    expect(seen.length).toBe(before)
  })
})

describe('protocol upgrades', () => {
  it('an upgrade to an allowed host carries the secret and then joins both sides byte for byte', async () => {
    const { tls } = await tlsThroughProxy('tok-allow', 'allowed.test', httpsPort)
    const echoed = await new Promise<string>((resolve, reject) => {
      const req = httpsRequest({
        host: 'allowed.test',
        port: httpsPort,
        path: '/ws',
        headers: { connection: 'Upgrade', upgrade: 'echo', authorization: `Bearer ${PLACEHOLDER}` },
        createConnection: () => tls!,
      })
      req.on('error', reject)
      req.on('upgrade', (_res, socket) => {
        socket.once('data', (chunk) => {
          resolve(String(chunk))
          socket.destroy()
        })
        socket.write('ping through the proxy')
      })
      req.end()
    })
    expect(echoed).toBe('ping through the proxy')
    expect(lastSeen().headers.authorization).toBe(`Bearer ${SECRET}`)
    expect(lastSeen().headers.upgrade).toBe('echo')
  })
})

describe('streaming', () => {
  it('a long answer arrives whole, through an intercepted tunnel and a plain one', async () => {
    for (const host of ['allowed.test', 'other.test']) {
      const answer = await viaProxy('tok-allow', host, httpsPort, {}, '/big')
      expect(answer.status).toBe(200)
      expect(answer.body).toBe(BIG_CHUNK.repeat(64))
    }
  })
})

describe('git credentials', () => {
  it('a request to the account host gets Basic auth from the proxy', async () => {
    const answer = await viaProxy('tok-allow', 'git.test', httpsPort)
    expect(answer).toMatchObject({ connect: 200, status: 200 })
    const expected = `Basic ${Buffer.from(`x-access-token:${GIT_TOKEN}`).toString('base64')}`
    expect(lastSeen().headers.authorization).toBe(expected)
    expect(answer.echoed).toBe('Basic berth_redacted_git_token')
  })

  it('an Authorization the client sent itself is left alone, and other hosts get none', async () => {
    await viaProxy('tok-allow', 'git.test', httpsPort, { authorization: 'Bearer mine' })
    expect(lastSeen().headers.authorization).toBe('Bearer mine')
    await viaProxy('tok-allow', 'other.test', httpsPort)
    expect(lastSeen().host).toBe(`other.test:${httpsPort}`)
    expect(lastSeen().headers.authorization).toBeUndefined()
  })
})

describe('git over the proxy', () => {
  it('clones from a Git host with its private CA, the token added by the proxy only', async () => {
    const caFile = join(dir, 'broker-ca-git.pem')
    writeFileSync(caFile, ca.certPem)
    const dest = join(dir, 'clone')
    const env = { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0' }
    await promisify(execFile)(
      'git',
      [
        '-c',
        `http.proxy=http://berth:tok-allow@127.0.0.1:${forwarderPort}`,
        '-c',
        `http.sslCAInfo=${caFile}`,
        'clone',
        '-q',
        `https://git.test:${gitHost.port}/demo.git`,
        dest,
      ],
      { env },
    )
    expect(readFileSync(join(dest, 'README.md'), 'utf8')).toBe('# Demo through the proxy\n')
    expect(gitHost.requests.length).toBeGreaterThan(0)
    expect(gitHost.requests.every((r) => r.username === 'x-access-token' && r.status === 200)).toBe(true)
    expect(readFileSync(join(dest, '.git', 'config'), 'utf8')).not.toContain(GIT_TOKEN)
  })
})

describe('network policy and tokens', () => {
  it('a host outside the allowlist gets 403 and nothing reaches any upstream', async () => {
    const before = { seen: seen.length, connections: connections.https }
    expect(await viaProxy('tok-allow', 'outside.test', httpsPort)).toEqual({ connect: 403 })
    // allowed.test is listed for two ports only.
    expect(await viaProxy('tok-allow', 'allowed.test', 1)).toEqual({ connect: 403 })
    // Allowed, but nothing listens there: the proxy says so instead of opening the tunnel.
    expect(await viaProxy('tok-allow', 'other.test', 1)).toEqual({ connect: 502 })
    expect({ seen: seen.length, connections: connections.https }).toEqual(before)
  })

  it('policy none refuses everything, CONNECT and plain http alike', async () => {
    const before = { seen: seen.length, connections: connections.https }
    expect(await viaProxy('tok-none', 'allowed.test', httpsPort)).toEqual({ connect: 403 })
    expect((await plainViaProxy('tok-none', 'allowed.test')).status).toBe(403)
    expect({ seen: seen.length, connections: connections.https }).toEqual(before)
  })

  it('policy public refuses a name that resolves to a private address', async () => {
    expect(await viaProxy('tok-public', 'allowed.test', httpsPort)).toEqual({ connect: 403 })
    expect((await plainViaProxy('tok-public', 'allowed.test')).status).toBe(403)
  })

  it('a missing or unknown token gets 407', async () => {
    expect(await viaProxy(null, 'allowed.test', httpsPort)).toEqual({ connect: 407 })
    expect(await viaProxy('tok-wrong', 'allowed.test', httpsPort)).toEqual({ connect: 407 })
    expect((await plainViaProxy('tok-wrong', 'allowed.test')).status).toBe(407)
  })
})

describe('curl through a loopback forwarder, as the agent would', () => {
  const run = promisify(execFile)

  it('sends the real value to the allowed host and the placeholder elsewhere', async () => {
    const caFile = join(dir, 'broker-ca.pem')
    writeFileSync(caFile, ca.certPem)
    const curl = (host: string) =>
      run('curl', [
        '-sS',
        '--fail',
        '--proxy',
        `http://berth:tok-allow@127.0.0.1:${forwarderPort}`,
        '--cacert',
        caFile,
        '-H',
        `Authorization: Bearer ${PLACEHOLDER}`,
        `https://${host}:${httpsPort}/curl`,
      ])
    expect((await curl('allowed.test')).stdout).toBe('ok')
    expect(lastSeen().headers.authorization).toBe(`Bearer ${SECRET}`)
    // other.test is tunnelled: curl sees the upstream's certificate, which the broker CA did not sign.
    await expect(curl('other.test')).rejects.toThrow(/certificate/i)
  })
})

describe('broker CA', () => {
  it('is written once with a public certificate and a private key, and reused', async () => {
    expect(statSync(join(dir, 'ca', 'ca.pem')).mode & 0o777).toBe(0o644)
    expect(statSync(join(dir, 'ca', 'ca-key.pem')).mode & 0o777).toBe(0o600)
    const again = await loadOrCreateBrokerCa(join(dir, 'ca'))
    expect(again.certPem).toBe(ca.certPem)
    expect(ca.leafFor('allowed.test').certPem).toBe(ca.leafFor('ALLOWED.test').certPem)
    expect(ca.leafFor('allowed.test').certPem).not.toBe(ca.leafFor('other.test').certPem)
  })

  it('two servers starting on one directory end up with the same CA', async () => {
    const shared = join(dir, 'shared-ca')
    const [a, b] = await Promise.all([loadOrCreateBrokerCa(shared), loadOrCreateBrokerCa(shared)])
    expect(a.certPem).toBe(b.certPem)
    expect(a.keyPem).toBe(b.keyPem)
    expect(readFileSync(join(shared, 'ca.pem'), 'utf8')).toBe(a.certPem)
  })
})

describe('policy by host name', () => {
  const answers = (table: Record<string, string[]>) => async (host: string) => {
    const found = table[host]
    if (!found) throw new Error(`${host}: not found`)
    return found
  }

  it('public: a name whose addresses are all public passes, and the first checked address is the one used', async () => {
    const lookup = answers({
      'api.example.com': ['203.0.113.7', '198.51.100.1'],
      'mixed.example.com': ['203.0.113.7', '10.0.0.1'],
    })
    expect(await checkDestination({ policy: 'public' }, 'api.example.com', 443, lookup)).toEqual({
      ok: true,
      host: 'api.example.com',
      port: 443,
      address: '203.0.113.7',
    })
    expect(await checkDestination({ policy: 'public' }, 'mixed.example.com', 443, lookup)).toMatchObject({
      ok: false,
      status: 403,
    })
    expect(await checkDestination({ policy: 'public' }, '169.254.169.254', 80, lookup)).toMatchObject({
      ok: false,
      status: 403,
    })
    expect(await checkDestination({ policy: 'public' }, '[::ffff:127.0.0.1]', 80, lookup)).toMatchObject({
      ok: false,
      status: 403,
    })
    expect(await checkDestination({ policy: 'public' }, 'nowhere.example.com', 443, lookup)).toMatchObject({
      ok: false,
      status: 502,
    })
  })

  it('allowlist: listed names (any case, trailing dot) and CIDRs on listed ports; private addresses only with allowPrivate', async () => {
    const lookup = answers({ 'api.example.com': ['203.0.113.7'], 'internal.example.com': ['10.1.2.3'] })
    const egress = {
      policy: 'allowlist' as const,
      allow: [{ host: 'api.example.com', ports: [443] }, { host: '198.51.100.0/24' }, { host: 'internal.example.com' }],
    }
    expect(await checkDestination(egress, 'API.Example.com.', 443, lookup)).toMatchObject({
      ok: true,
      address: '203.0.113.7',
    })
    expect(await checkDestination(egress, 'api.example.com', 80, lookup)).toMatchObject({ ok: false, status: 403 })
    expect(await checkDestination(egress, 'evil.example.com', 443, lookup)).toMatchObject({ ok: false, status: 403 })
    expect(await checkDestination(egress, '198.51.100.9', 8080, lookup)).toMatchObject({
      ok: true,
      address: '198.51.100.9',
    })
    expect(await checkDestination(egress, '198.51.101.9', 8080, lookup)).toMatchObject({ ok: false, status: 403 })
    expect(await checkDestination(egress, 'internal.example.com', 443, lookup)).toMatchObject({
      ok: false,
      status: 403,
    })
    expect(
      await checkDestination({ ...egress, allowPrivate: true }, 'internal.example.com', 443, lookup),
    ).toMatchObject({
      ok: true,
      address: '10.1.2.3',
    })
  })

  it('secret hosts: exact names, or *.domain for the names below it only', () => {
    expect(hostMatches('api.example.com', 'API.example.com')).toBe(true)
    expect(hostMatches('*.example.com', 'a.example.com')).toBe(true)
    expect(hostMatches('*.example.com', 'a.b.example.com')).toBe(true)
    expect(hostMatches('*.example.com', 'example.com')).toBe(false)
    expect(hostMatches('*.example.com', 'badexample.com')).toBe(false)
    expect(hostMatches('api.example.com', 'api.example.com.evil.test')).toBe(false)
  })

  it('secret hosts with a port match that port only; without one, any port', () => {
    expect(secretHostMatches('api.example.com:8443', 'api.example.com', 8443)).toBe(true)
    expect(secretHostMatches('api.example.com:8443', 'api.example.com', 443)).toBe(false)
    expect(secretHostMatches('192.0.2.9:4000', '192.0.2.9', 4000)).toBe(true)
    expect(secretHostMatches('192.0.2.9:4000', '192.0.2.9', 4001)).toBe(false)
    expect(secretHostMatches('*.example.com:443', 'a.example.com', 443)).toBe(true)
    expect(secretHostMatches('api.example.com', 'api.example.com', 8443)).toBe(true)
  })
})
