/**
 * The standalone server configured the way an operator does it: a real child process
 * (`node --import tsx examples/standalone-server/src/main.ts`, as `pnpm start` runs it) whose only settings are environment
 * variables pointing at the local provider fakes, every connect flow walked over HTTP as
 * a browser and a caller would; then the same from a `berth.config.json`, and the start-up
 * refusals that name the setting.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { createServer as createHttpsServer, get as httpsGet, type Server as HttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import type { TLSSocket } from 'node:tls'
import { X509Certificate } from 'node:crypto'
import {
  selfSignedCert,
  startFakeBankProvider,
  startFakeChatProvider,
  startFakeGitProvider,
  startFakeMailProvider,
  startFakeMessenger,
  type FakeBankProvider,
  type FakeChatProvider,
  type FakeGitProvider,
  type FakeMailProvider,
  type FakeMessenger,
} from '@berth/testkit/providers'
import { spawnSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { BerthClient } from '@berth/client'
import { clientFor } from './helpers.js'
import { REPO_ROOT, bareEnv, freePort, startStandalone, type Standalone } from './standalone.helpers.js'

const MAIN = join(REPO_ROOT, 'examples/standalone-server/src/main.ts')
/** As `pnpm start` runs it: `node --import tsx src/main.ts`, tsx resolved from the example. */
const SERVER = [
  process.execPath,
  '--import',
  pathToFileURL(join(REPO_ROOT, 'examples/standalone-server/node_modules/tsx/dist/loader.mjs')).href,
  MAIN,
]
const ADMIN = 'operator-token-standalone-config'
const GIT = ['github', 'gitlab', 'bitbucket'] as const

/** A new user of the child server: its typed client. */
async function newUser(url: string, name: string): Promise<BerthClient> {
  const made = await clientFor({ url }, ADMIN).admin.users.create({ body: { name } })
  return clientFor({ url }, made.key.token)
}

/** authorize (as the caller) → the provider's consent → the callback (as the browser): where the browser lands. */
async function connect(
  authorized: Promise<{ url: string }>,
  expectedAuthorizeUrl: string,
  callbackUrl: string,
): Promise<URL> {
  const authorize = new URL((await authorized).url)
  expect(`${authorize.origin}${authorize.pathname}`).toBe(expectedAuthorizeUrl)
  // BERTH_PUBLIC_URL made the redirect URI.
  expect(authorize.searchParams.get('redirect_uri')).toBe(callbackUrl)
  const consent = await fetch(authorize, { redirect: 'manual' })
  expect(consent.status).toBe(302)
  const back = new URL(consent.headers.get('location')!)
  expect(`${back.origin}${back.pathname}`).toBe(callbackUrl)
  const done = await fetch(back, { redirect: 'manual' })
  expect(done.status, await done.text()).toBe(302)
  return new URL(done.headers.get('location')!, 'http://return.invalid')
}

describe('standalone server, configured from the environment only', () => {
  const git = {} as Record<(typeof GIT)[number], FakeGitProvider>
  let chat: FakeChatProvider
  let mail: FakeMailProvider
  let bank: FakeBankProvider
  let messenger: FakeMessenger
  let dir: string
  let server: Standalone

  beforeAll(async () => {
    for (const p of GIT) git[p] = await startFakeGitProvider({ provider: p })
    chat = await startFakeChatProvider()
    mail = await startFakeMailProvider()
    bank = await startFakeBankProvider()
    messenger = await startFakeMessenger()
    // An empty directory to start in: no .env, no config file.
    dir = mkdtempSync(join(tmpdir(), 'berth-standalone-env-'))
    const port = await freePort()
    const m = mail.config()
    const bb = git.bitbucket.config()
    server = await startStandalone({
      command: SERVER,
      cwd: dir,
      port,
      env: bareEnv({
        PORT: String(port),
        BERTH_DATA_DIR: join(dir, 'data'),
        BERTH_ADMIN_TOKEN: ADMIN,
        BERTH_RUNTIME: 'local',
        BERTH_PUBLIC_URL: `http://127.0.0.1:${port}`,
        // GitHub Enterprise and a self-hosted GitLab: one web address each.
        BERTH_GITHUB_CLIENT_ID: git.github.clientId,
        BERTH_GITHUB_CLIENT_SECRET: git.github.clientSecret,
        BERTH_GITHUB_URL: git.github.url,
        BERTH_GITLAB_CLIENT_ID: git.gitlab.clientId,
        BERTH_GITLAB_CLIENT_SECRET: git.gitlab.clientSecret,
        BERTH_GITLAB_URL: `${git.gitlab.url}/`,
        // Bitbucket: its endpoints one by one.
        BERTH_BITBUCKET_CLIENT_ID: bb.clientId,
        BERTH_BITBUCKET_CLIENT_SECRET: bb.clientSecret,
        BERTH_BITBUCKET_AUTHORIZE_URL: bb.authorizeUrl,
        BERTH_BITBUCKET_TOKEN_URL: bb.tokenUrl,
        BERTH_BITBUCKET_API_URL: bb.apiBaseUrl,
        BERTH_CHAT_CLIENT_ID: chat.clientId,
        BERTH_CHAT_CLIENT_SECRET: chat.clientSecret,
        BERTH_CHAT_SIGNING_SECRET: chat.config().signingSecret!,
        BERTH_CHAT_URL: chat.url,
        BERTH_MAIL_CLIENT_ID: m.clientId,
        BERTH_MAIL_CLIENT_SECRET: m.clientSecret,
        BERTH_MAIL_AUTHORIZE_URL: m.authorizeUrl,
        BERTH_MAIL_TOKEN_URL: m.tokenUrl,
        BERTH_MAIL_API_URL: m.apiBaseUrl,
        BERTH_MAIL_USERINFO_URL: m.userinfoUrl,
        BERTH_MAIL_REVOKE_URL: m.revokeUrl,
        BERTH_BANK_API_URL: bank.url,
        BERTH_BANK_TIMEOUT_MS: '5000',
        BERTH_MESSENGER_API_URL: messenger.url,
      }),
    })
  })
  afterAll(async () => {
    expect(await server?.stop()).toBe(0)
    await Promise.all([...Object.values(git), chat, mail, bank, messenger].map((f) => f?.close()))
    rmSync(dir, { recursive: true, force: true })
  })

  it('says where its settings came from and which integrations are on, without a secret', () => {
    expect(server.output()).toContain(
      `Settings: environment · integrations: github, gitlab, bitbucket, chat, mail, bank at ${new URL(bank.url).host}, messenger at ${new URL(messenger.url).host}`,
    )
    for (const secret of [...GIT.map((p) => git[p].clientSecret), chat.clientSecret, mail.clientSecret, ADMIN])
      expect(server.output()).not.toContain(secret)
    // The credential broker is on by default, and says where its sockets are.
    expect(server.output()).toMatch(
      /Credentials: broker on \(model gateway and egress proxy on sockets in \/.+\/broker\/public\)/,
    )
  })

  it('/health shows the released version of the server package', async () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'packages/server/package.json'), 'utf8')) as {
      version: string
    }
    expect(version).toMatch(/^\d+\.\d+\.\d+/)
    expect(version).not.toBe('0.0.0')
    expect((await clientFor(server).health()).version).toBe(version)
  })

  it.each(GIT)('connects a %s account: authorize → consent → callback → listed', async (p) => {
    const api = await newUser(server.url, `dev ${p}`)
    const authorized = api.git.authorize({ params: { provider: p }, query: { returnPath: '/settings/git' } })
    const landed = await connect(
      authorized,
      git[p].config().authorizeUrl,
      `${server.url}/v1/integrations/git/${p}/callback`,
    )
    expect(landed.pathname).toBe('/settings/git')
    expect(Object.fromEntries(landed.searchParams)).toMatchObject({ git: 'connected', provider: p })
    const { accounts } = await api.git.accounts.list()
    expect(accounts).toEqual([expect.objectContaining({ provider: p, login: expect.any(String), status: 'connected' })])
    // The token the provider issued works at the provider: the account is real.
    expect(git[p].issuedTokens().some((t) => git[p].tokenOwner(t) === accounts[0]!.login)).toBe(true)
  })

  it.each([
    ['chatprovider', () => chat.config().authorizeUrl],
    ['mailprovider', () => mail.config().authorizeUrl],
  ] as const)('connects a %s integration: authorize → consent → callback → connected', async (type, authorizeUrl) => {
    const api = await newUser(server.url, `ops ${type}`)
    const landed = await connect(
      api.request(`integrations.${type}.authorize`, { query: { returnPath: '/settings' } }),
      authorizeUrl(),
      `${server.url}/api/${type}/callback`,
    )
    expect(Object.fromEntries(landed.searchParams)).toMatchObject({ integration: 'connected', type })
    const list = await api.integrations.list({ query: { type } })
    expect(list).toMatchObject({
      total: 1,
      integrations: [{ type, status: 'connected', config: { access_token: '••••••••' } }],
    })
  })

  it("connects a bank: widget settings → the widget's payload → verified with the provider → connected", async () => {
    const api = await newUser(server.url, 'treasurer')
    await api.integrations.bankprovider.config({ body: { application_id: 'app_standalone', environment: 'sandbox' } })
    const before = bank.requests.length
    const res = await api.integrations.bankprovider.callback({
      body: bank.enroll({ institution: 'Local Credit Union', accounts: 1 }),
    })
    expect(res).toMatchObject({
      type: 'bankprovider',
      status: 'connected',
      config: { institution: 'Local Credit Union', application_id: 'app_standalone' },
    })
    expect(bank.requests.slice(before)).toEqual([
      { method: 'GET', path: '/accounts', authenticated: true, status: 200 },
    ])
  })

  it('connects a messenger bot: setup → webhook at BERTH_PUBLIC_URL → the claim code sent in a chat → claimed', async () => {
    const api = await newUser(server.url, 'bot owner')
    const bot = messenger.createBot({ username: 'standalone_bot' })
    await api.integrations.messenger.setup({ body: { bot_token: bot.token } })
    expect(messenger.webhookOf(bot.token)?.url).toBe(`${server.url}/api/messenger/webhook`)
    const { code } = await api.integrations.messenger.claim()
    const chatWith = messenger.chat()
    // The fake delivers the message to the registered webhook, i.e. to the child server.
    expect((await messenger.sendUpdate(bot.token, { chat: chatWith, text: code })).status).toBe(200)
    expect(await api.integrations.messenger.config()).toMatchObject({
      configured: true,
      claim: { claimed: true, chat: expect.objectContaining({ id: chatWith.id }) },
    })
  })
})

describe('standalone server, configured from berth.config.json and .env', () => {
  let github: FakeGitProvider
  let dir: string
  let server: Standalone

  beforeAll(async () => {
    github = await startFakeGitProvider({ provider: 'github' })
    dir = mkdtempSync(join(tmpdir(), 'berth-standalone-file-'))
    const port = await freePort()
    writeFileSync(
      join(dir, 'berth.config.json'),
      JSON.stringify({
        port,
        adminToken: ADMIN,
        dataDir: './data',
        runtime: 'local',
        pool: { max: 3 },
        git: {
          github: {
            clientId: github.clientId,
            clientSecret: 'overridden by the environment',
            url: github.url,
            scopes: ['repo', 'read:org'],
          },
        },
      }),
    )
    // .env wins over the file, the environment over both.
    writeFileSync(join(dir, '.env'), 'BERTH_POOL_MAX=5\nBERTH_GITHUB_CLIENT_SECRET=not-the-secret\n')
    server = await startStandalone({
      command: SERVER,
      cwd: dir,
      port,
      env: bareEnv({ BERTH_GITHUB_CLIENT_SECRET: github.clientSecret }),
    })
  })
  afterAll(async () => {
    expect(await server?.stop()).toBe(0)
    await github?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('reads the files beside where it starts (environment over .env over the config file) and connects from them', async () => {
    expect(server.output()).toContain('Settings: environment, .env, berth.config.json · integrations: github')
    expect(server.output()).toMatch(/pool \S+: min 0, max 5, warm agents \d \(idle 600 s\)/)
    expect(server.output()).toContain(join(dir, 'data'))
    const api = await newUser(server.url, 'file user')
    // No BERTH_PUBLIC_URL: the redirect URI is made from the request's origin.
    const auth = await api.git.authorize({ params: { provider: 'github' } })
    expect(new URL(auth.url).searchParams.get('scope')).toBe('repo read:org')
    const landed = await connect(
      api.git.authorize({ params: { provider: 'github' }, query: { returnPath: '/' } }),
      github.config().authorizeUrl,
      `${server.url}/v1/integrations/git/github/callback`,
    )
    expect(landed.searchParams.get('git')).toBe('connected')
    expect((await api.git.accounts.list()).accounts).toHaveLength(1)
  })
})

describe('standalone server, banking API behind mutual TLS (BERTH_BANK_CERT_FILE)', () => {
  let bank: FakeBankProvider
  let proxy: HttpsServer
  let dir: string
  let server: Standalone
  const client = selfSignedCert({ dns: ['berth-client.test'] })
  const presented: string[] = []

  beforeAll(async () => {
    bank = await startFakeBankProvider()
    const tls = selfSignedCert({ ips: ['127.0.0.1'] })
    // The provider's API as it is outside the sandbox: HTTPS that demands a client certificate it trusts.
    proxy = createHttpsServer(
      { ...tls, requestCert: true, rejectUnauthorized: true, ca: client.cert },
      async (req, res) => {
        presented.push((req.socket as TLSSocket).getPeerCertificate().fingerprint256)
        const answer = await fetch(bank.url + req.url, { headers: { authorization: req.headers.authorization ?? '' } })
        res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' })
        res.end(await answer.text())
      },
    )
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r))
    dir = mkdtempSync(join(tmpdir(), 'berth-standalone-mtls-'))
    for (const [name, pem] of [
      ['client.pem', client.cert],
      ['client.key', client.key],
      ['provider-ca.pem', tls.cert],
    ] as const)
      writeFileSync(join(dir, name), pem)
    const port = await freePort()
    server = await startStandalone({
      command: SERVER,
      cwd: dir,
      port,
      env: bareEnv({
        PORT: String(port),
        BERTH_ADMIN_TOKEN: ADMIN,
        BERTH_RUNTIME: 'local',
        BERTH_BANK_API_URL: `https://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
        BERTH_BANK_CERT_FILE: join(dir, 'client.pem'),
        BERTH_BANK_KEY_FILE: join(dir, 'client.key'),
        BERTH_BANK_CA_FILE: join(dir, 'provider-ca.pem'),
      }),
    })
  })
  afterAll(async () => {
    expect(await server?.stop()).toBe(0)
    await new Promise((r) => proxy?.close(r))
    await bank?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('the provider refuses a client without the certificate', async () => {
    const port = (proxy.address() as AddressInfo).port
    const refused = await new Promise<string>((resolve) => {
      const req = httpsGet(
        {
          host: '127.0.0.1',
          port,
          path: '/accounts',
          ca: selfSignedCert({ ips: ['127.0.0.1'] }).cert,
          rejectUnauthorized: false,
        },
        (res) => resolve(`answered ${res.statusCode}`),
      )
      req.on('error', (err: NodeJS.ErrnoException) => resolve(`refused: ${err.code ?? err.message}`))
    })
    expect(refused).toMatch(/^refused/)
  })

  it('connects a bank through it with the configured certificate', async () => {
    const api = await newUser(server.url, 'treasurer')
    await api.integrations.bankprovider.config({ body: { application_id: 'app_mtls', environment: 'production' } })
    const res = await api.integrations.bankprovider.callback({
      body: bank.enroll({ institution: 'Mutual Bank', accounts: 1 }),
    })
    expect(res).toMatchObject({ status: 'connected', config: { institution: 'Mutual Bank' } })
    expect(presented).toEqual([new X509Certificate(client.cert).fingerprint256])
  })
})

describe('standalone server refuses settings that cannot be right, naming them', () => {
  const refuse = (settings: Record<string, string>, file?: unknown) => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-standalone-bad-'))
    try {
      if (file !== undefined) writeFileSync(join(dir, 'berth.config.json'), JSON.stringify(file))
      const r = spawnSync(SERVER[0]!, SERVER.slice(1), {
        cwd: dir,
        env: bareEnv({ BERTH_RUNTIME: 'local', BERTH_STORAGE: 'memory', PORT: '0', ...settings }),
        encoding: 'utf8',
        timeout: 60_000,
      })
      expect(r.status).toBe(1)
      return r.stderr.trim().split('\n').at(-1)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }

  it.each([
    [
      { BERTH_GITHUB_CLIENT_ID: 'abc' },
      undefined,
      'berth: BERTH_GITHUB_CLIENT_ID is set but BERTH_GITHUB_CLIENT_SECRET (git.github.clientSecret) is not',
    ],
    [
      { BERTH_GITLAB_URL: 'https://gitlab.internal' },
      undefined,
      'berth: BERTH_GITLAB_URL needs BERTH_GITLAB_CLIENT_ID (git.gitlab.clientId) and BERTH_GITLAB_CLIENT_SECRET (git.gitlab.clientSecret)',
    ],
    [
      { BERTH_BANK_API_URL: 'ftp://bank' },
      undefined,
      'berth: BERTH_BANK_API_URL must be an http:// or https:// URL, got "ftp://bank"',
    ],
    [{ BERTH_BANK_CERT_FILE: '/dev/null' }, undefined, 'berth: BERTH_BANK_CERT_FILE: "/dev/null" holds no PEM data'],
    [
      { BERTH_MESSENGER_TIMEOUT_MS: 'soon' },
      undefined,
      'berth: BERTH_MESSENGER_TIMEOUT_MS must be a whole number of milliseconds >= 1, got "soon"',
    ],
    [
      {},
      { chat: { clientId: 'c', clientSecret: 's', url: 'not a url' } },
      'berth: chat.url in berth.config.json must be a URL like https://host.example, got "not a url"',
    ],
    [
      {},
      { pool: { maxx: 3 } },
      'berth: berth.config.json: unknown setting "pool.maxx" (the README\'s Configuration table lists every key)',
    ],
    [
      { BERTH_POOL_MIN: '9' },
      { pool: { max: 4 } },
      'berth: BERTH_POOL_MIN (9) must not exceed pool.max in berth.config.json (4)',
    ],
  ])('%j with file %j', (env, file, message) => {
    expect(refuse(env, file)).toBe(message)
  })
})
