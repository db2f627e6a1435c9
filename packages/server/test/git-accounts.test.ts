/**
 * Git provider accounts over real HTTP: the OAuth flow of each provider against its local
 * fake (`@berth/testkit/providers`), the state's guarantees (signed, expiring, single-use,
 * bound to caller, provider and return path), open-redirect refusal, token refresh,
 * revocation, disconnect, the profile link, and a task in a Podman container cloning over
 * HTTPS from a local Git host with the account's token through the credential helper.
 */
import type { BerthClient } from '@berth/client'
import { DEFAULT_ENVIRONMENT_CAPS } from '@berth/core'
import {
  startFakeGitProvider,
  startFakeGitServer,
  selfSignedCert,
  type FakeGitProvider,
  type FakeGitServer,
} from '@berth/testkit/providers'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clientFor, failure, startServer, waitForTask, type TestServer } from './helpers.js'
import { engineRuntime, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { hostAddress } from './net.helpers.js'

/** The error body of a raw answer (a browser's callback is no client call). */
type ErrorBody = { code: string; details: { issues: { location: string; path: string; message: string }[] } }
const PROVIDERS = ['github', 'gitlab', 'bitbucket'] as const
type Provider = (typeof PROVIDERS)[number]
const HOUR = 3_600_000

/** Everything the server stores, as text (tokens must only ever be there encrypted). */
async function storageDump(s: TestServer): Promise<string> {
  const keys = await s.berth.storage.getKeys()
  const values = await Promise.all(keys.map((k) => s.berth.storage.getItem(k)))
  return keys.map((k, i) => `${k} ${JSON.stringify(values[i])}`).join('\n')
}

const api = (s: TestServer, token: string): BerthClient => clientFor(s, token)
/** The authorize call of `p`, as the caller (the answer carries the provider URL with the state). */
const authorize = (api: BerthClient, provider: Provider, returnPath?: string) =>
  api.git.authorize({ params: { provider }, query: returnPath === undefined ? {} : { returnPath } })

/** Follow the provider's consent: returns the callback URL it redirects the browser to. */
async function consent(authorizeUrl: string): Promise<URL> {
  const res = await fetch(authorizeUrl, { redirect: 'manual' })
  expect(res.status).toBe(302)
  return new URL(res.headers.get('location')!)
}

/** Hit the callback as a browser would (no Berth credentials unless `token`). */
async function callback(
  url: URL | string,
  token?: string,
): Promise<{ status: number; location: string | null; body: ErrorBody | null }> {
  const res = await fetch(url, { redirect: 'manual', headers: token ? { authorization: `Bearer ${token}` } : {} })
  const text = await res.text()
  return {
    status: res.status,
    location: res.headers.get('location'),
    body: text ? (JSON.parse(text) as ErrorBody) : null,
  }
}

describe('git provider accounts (OAuth against the fake providers)', () => {
  let s: TestServer
  const fakes = {} as Record<Provider, FakeGitProvider>
  let clock: TestServer['clock'] | undefined

  beforeAll(async () => {
    for (const p of PROVIDERS) fakes[p] = await startFakeGitProvider({ provider: p, now: () => clock!.now() })
    s = await startServer({ gitProviders: Object.fromEntries(PROVIDERS.map((p) => [p, fakes[p].config()])) })
    clock = s.clock
  })
  afterAll(async () => {
    await s?.close()
    await Promise.all(Object.values(fakes).map((f) => f.close()))
  })

  const tokenRequests = (p: Provider, grant?: string) =>
    fakes[p].requests.filter(
      (r) =>
        r.path.endsWith(p === 'github' ? '/access_token' : p === 'gitlab' ? '/oauth/token' : '/access_token') &&
        (!grant || r.grant_type === grant),
    )
  const stateKeys = async () => (await s.berth.storage.getKeys()).filter((k) => k.includes('oauth-states')).length

  /** authorize → consent → callback, as a browser; returns the redirect back and the account id. */
  async function connect(p: Provider, token: string, returnPath = '/settings/git') {
    const auth = await authorize(api(s, token), p, returnPath)
    const back = await callback(await consent(auth.url))
    expect(back.status, JSON.stringify(back.body)).toBe(302)
    const location = new URL(back.location!, 'http://return.invalid')
    return { auth, location, accountId: location.searchParams.get('account') }
  }

  describe.each(PROVIDERS)('%s', (p) => {
    // Each test has its own callers and account: none leans on what another left.
    let n = 0
    const user = (name: string) => s.user(`${name} ${p} ${++n}`)
    /** A caller with a connected account. */
    const connected = async () => {
      const alice = await user('Alice')
      const { accountId } = await connect(p, alice.token)
      return { alice, accountId: accountId! }
    }

    it('authorize answers the provider URL with a signed state, the callback redirect URI and PKCE where supported', async () => {
      const alice = await user('Alice')
      const res = await authorize(api(s, alice.token), p, '/settings/git')
      const url = new URL(res.url)
      expect(`${url.origin}${url.pathname}`).toBe(fakes[p].config().authorizeUrl)
      expect(url.searchParams.get('client_id')).toBe(fakes[p].clientId)
      expect(url.searchParams.get('redirect_uri')).toBe(`${s.url}/v1/integrations/git/${p}/callback`)
      expect(url.searchParams.get('state')).toMatch(/^[a-z0-9]{32}\.[a-z0-9]+\.[A-Za-z0-9_-]{43}$/)
      if (p === 'bitbucket') expect(url.searchParams.has('code_challenge')).toBe(false)
      else
        expect({
          method: url.searchParams.get('code_challenge_method'),
          challenge: url.searchParams.get('code_challenge'),
        }).toEqual({ method: 'S256', challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) })
      // Nothing secret in the answer: the PKCE verifier and the client secret stay on the server.
      expect(JSON.stringify(res)).not.toContain(fakes[p].clientSecret)
    })

    it('connects an account: consent → callback → stored and listed, tokens nowhere in any response or in storage', async () => {
      const [alice, bob] = [await user('Alice'), await user('Bob')]
      const before = tokenRequests(p, 'authorization_code').length
      const issuedBefore = fakes[p].issuedTokens().length
      const { location, accountId: id, auth } = await connect(p, alice.token, '/settings/git?tab=accounts#top')
      expect(location.pathname).toBe('/settings/git')
      expect(Object.fromEntries(location.searchParams)).toEqual({
        tab: 'accounts',
        git: 'connected',
        provider: p,
        account: expect.stringMatching(/^git_[a-z0-9]+$/),
      })
      expect(location.hash).toBe('#top')
      const accountId = id!
      const exchanges = tokenRequests(p, 'authorization_code')
      expect(exchanges.length).toBe(before + 1)
      // The code exchange carried the PKCE verifier the fake checked (and answered 200).
      expect(exchanges.at(-1)).toMatchObject({ status: 200, pkce: p !== 'bitbucket' })

      const call = api(s, alice.token)
      const list = await call.git.accounts.list()
      expect(list).toEqual({
        accounts: [
          {
            id: accountId,
            provider: p,
            login: `octo-${p}`,
            scopes: expect.any(Array),
            status: 'connected',
            created_at: expect.any(String),
            updated_at: expect.any(String),
          },
        ],
        total: 1,
        next_cursor: null,
      })
      expect(list.accounts[0]!.scopes.length).toBeGreaterThan(0)
      const one = await call.git.accounts.get({ params: { id: accountId } })
      expect(one).toEqual(list.accounts[0])
      const filtered = await call.git.accounts.list({ query: { provider: p === 'github' ? 'gitlab' : 'github' } })
      expect(filtered).toEqual({ accounts: [], total: 0, next_cursor: null })
      // Bob sees nothing of it.
      expect(await api(s, bob.token).git.accounts.list()).toEqual({ accounts: [], total: 0, next_cursor: null })
      expect((await failure(api(s, bob.token).git.accounts.get({ params: { id: accountId } }))).status).toBe(404)

      const tokens = fakes[p].issuedTokens().slice(issuedBefore)
      expect(tokens.length).toBe(2)
      const everything = [
        JSON.stringify(auth),
        JSON.stringify(list),
        JSON.stringify(one),
        location.href,
        await storageDump(s),
      ].join('\n')
      for (const t of tokens) expect(everything).not.toContain(t)
      expect(everything).not.toContain(fakes[p].clientSecret)
    })

    it('hands out the stored token while it is fresh and refreshes it with the refresh token once it expires', async () => {
      const { alice, accountId } = await connected()
      const refreshes = tokenRequests(p, 'refresh_token').length
      const [a] = await s.berth.services.gitAccounts.credentials(alice.id, [accountId])
      expect(a).toMatchObject({ username: expect.any(String), host: expect.any(String) })
      const firstToken = a!.token
      expect(fakes[p].tokenOwner(firstToken)).toBe(`octo-${p}`)
      expect(tokenRequests(p, 'refresh_token')).toHaveLength(refreshes)

      clock!.advance(9 * HOUR)
      expect(fakes[p].tokenOwner(firstToken)).toBeNull()
      const [b] = await s.berth.services.gitAccounts.credentials(alice.id, [accountId])
      expect(b!.token).not.toBe(firstToken)
      expect(fakes[p].tokenOwner(b!.token)).toBe(`octo-${p}`)
      expect(
        tokenRequests(p, 'refresh_token')
          .slice(refreshes)
          .map((r) => r.status),
      ).toEqual([200])
      // Refreshed once, then reused.
      const [c] = await s.berth.services.gitAccounts.credentials(alice.id, [accountId])
      expect(c!.token).toBe(b!.token)
      expect(tokenRequests(p, 'refresh_token')).toHaveLength(refreshes + 1)
      const list = await api(s, alice.token).git.accounts.list()
      expect(list.accounts[0]!.status).toBe('connected')
      const dump = await storageDump(s)
      for (const t of fakes[p].issuedTokens()) expect(dump).not.toContain(t)
    })

    it('marks the account needs_reconnect when the provider revoked the grant, and a reconnect restores the same account', async () => {
      const { alice, accountId } = await connected()
      fakes[p].revokeAll()
      clock!.advance(9 * HOUR)
      expect(await s.berth.services.gitAccounts.credentials(alice.id, [accountId])).toEqual([])
      expect(tokenRequests(p, 'refresh_token').at(-1)!.status).toBe(p === 'github' ? 200 : 400)
      const call = api(s, alice.token)
      expect((await call.git.accounts.get({ params: { id: accountId } })).status).toBe('needs_reconnect')

      const again = await connect(p, alice.token)
      expect(again.accountId).toBe(accountId)
      const list = await call.git.accounts.list()
      expect(list).toMatchObject({ total: 1, accounts: [{ id: accountId, status: 'connected' }] })
      expect(await s.berth.services.gitAccounts.credentials(alice.id, [accountId])).toHaveLength(1)
    })

    it('refuses forged, replayed, expired, cross-provider and cross-caller states with nothing stored', async () => {
      const [alice, bob] = [await user('Alice'), await user('Bob')]
      const call = api(s, alice.token)
      const total = async (who = alice) => (await api(s, who.token).git.accounts.list()).total
      const count = await total()
      const exchanges = tokenRequests(p).length
      const start = async () => consent((await authorize(call, p)).url)
      const expectRefused = async (url: URL | string, token?: string) => {
        const r = await callback(url, token)
        expect(r.status, JSON.stringify(r.body)).toBe(400)
        expect(r.body).toMatchObject({
          code: 'VALIDATION_FAILED',
          details: { issues: [{ location: 'query', path: 'state' }] },
        })
        return r.body!.details.issues[0]!.message
      }
      const withState = (url: URL, state: string) => {
        const u = new URL(url)
        u.searchParams.set('state', state)
        return u
      }

      // Forged: a made-up state; a real one with its signature or expiry changed.
      const cb = await start()
      const real = cb.searchParams.get('state')!
      const [nonce, exp, sig] = real.split('.') as [string, string, string]
      expect(await expectRefused(withState(cb, `${'a'.repeat(32)}.${exp}.${sig}`))).toMatch(/unknown/)
      expect(
        await expectRefused(withState(cb, `${nonce}.${exp}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`)),
      ).toMatch(/signature/)
      expect(
        await expectRefused(withState(cb, `${nonce}.${(Number.parseInt(exp, 36) + HOUR).toString(36)}.${sig}`)),
      ).toMatch(/signature/)
      expect(await expectRefused(withState(cb, 'not-a-state'))).toMatch(/malformed/)
      // Another provider's callback.
      const other = PROVIDERS.find((x) => x !== p)!
      const cross = new URL(cb.href.replace(`/git/${p}/callback`, `/git/${other}/callback`))
      expect(await expectRefused(cross)).toMatch(/another provider/)
      // Another caller presenting Alice's state.
      expect(await expectRefused(cb, bob.token)).toMatch(/another caller/)
      expect(await total(bob)).toBe(0)
      // None of that used the state up: Alice's own browser still completes the flow...
      const done = await callback(cb)
      expect(done.status).toBe(302)
      expect(new URL(done.location!, 'http://x').searchParams.get('git')).toBe('connected')
      // ... once: a replay is refused.
      expect(await expectRefused(cb)).toMatch(/already used/)

      // Expired: consent given, but the browser comes back 11 minutes later.
      const late = await start()
      clock!.advance(11 * 60_000)
      expect(await expectRefused(late)).toMatch(/expired/)
      expect(await expectRefused(late)).toMatch(/already used/)

      // Only the one good callback exchanged a code, and connected the one account.
      expect(tokenRequests(p).length).toBe(exchanges + 1)
      expect(await total()).toBe(count + 1)
    })

    it('a declined consent goes back to the return path with an error and stores nothing', async () => {
      const carol = await user('Carol')
      fakes[p].declineNext()
      const { location } = await connect(p, carol.token, '/settings/git')
      expect(Object.fromEntries(location.searchParams)).toEqual({ git: 'error', provider: p, reason: 'access_denied' })
      expect((await api(s, carol.token).git.accounts.list()).total).toBe(0)
    })

    it('links accounts to profiles: only your own, and tasks of the profile get their credentials', async () => {
      const { alice, accountId } = await connected()
      const bob = await user('Bob')
      const call = api(s, alice.token)
      const key = await call.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
      const bobKey = await api(s, bob.token).apiKeys.create({ body: { name: 'k', provider: 'stub' } })
      const bobProfile = await failure(
        api(s, bob.token).profiles.create({
          body: { name: 'B', slug: 'b', api_key_id: bobKey.id, git_account_ids: [accountId] },
        }),
      )
      expect(bobProfile.status).toBe(400)
      expect((bobProfile.details!.issues as unknown[])[0]).toMatchObject({
        location: 'body',
        path: 'git_account_ids.0',
      })
      const prof = await call.profiles.create({
        body: { name: 'P', slug: 'p', api_key_id: key.id, git_account_ids: [accountId] },
      })
      expect(prof.git_account_ids).toEqual([accountId])
      const unknown = await failure(
        call.profiles.update({
          params: { id: prof.id },
          body: { git_account_ids: [accountId, 'git_zzzzzzzzzzzzzzzzzzzz'] },
        }),
      )
      expect(unknown.status).toBe(400)
      expect((unknown.details!.issues as unknown[])[0]).toMatchObject({ path: 'git_account_ids.1' })
      expect((await call.profiles.get({ params: { id: prof.id } })).git_account_ids).toEqual([accountId])
      const { materialize } = await import('../../core/src/tasks/materialize.js')
      const services = s.berth.services
      const profile = await services.profiles.records.get(alice.id, prof.id)
      const ws = { id: 'ws_x', owner_id: alice.id, model_override: null, sdk_session_id: null } as never
      const task = {
        id: 'task_x',
        owner_id: alice.id,
        prompt: 'hi',
        allowed_tools: null,
        max_turns: null,
        max_budget_usd: null,
      }
      const input = await materialize({ ...services, gitAccounts: services.gitAccounts }, task, profile, ws)
      expect(input.git_credentials).toEqual([
        { host: expect.any(String), username: expect.any(String), token: expect.any(String) },
      ])
      expect(input.redact).toContain(input.git_credentials![0]!.token)
      expect(JSON.stringify(input.env)).not.toContain(input.git_credentials![0]!.token)
      await call.profiles.update({ params: { id: prof.id }, body: { git_account_ids: [] } })
    })

    it('disconnect deletes the account and revokes the grant at the provider (where it has revocation); a repeat is a 404', async () => {
      const { alice, accountId } = await connected()
      const bob = await user('Bob')
      const call = api(s, alice.token)
      const grantsBefore = fakes[p].activeGrants()
      expect(grantsBefore).toBeGreaterThan(0)
      expect((await failure(api(s, bob.token).git.accounts.delete({ params: { id: accountId } }))).status).toBe(404)
      await call.git.accounts.delete({ params: { id: accountId } })
      // Bitbucket has no revocation endpoint: disconnecting there is local.
      expect(fakes[p].activeGrants()).toBe(p === 'bitbucket' ? grantsBefore : grantsBefore - 1)
      expect(await call.git.accounts.list()).toEqual({ accounts: [], total: 0, next_cursor: null })
      expect((await failure(call.git.accounts.delete({ params: { id: accountId } }))).status).toBe(404)
      expect(await s.berth.services.gitAccounts.credentials(alice.id, [accountId])).toEqual([])
    })
  })

  describe('input that could redirect elsewhere or reach nothing', () => {
    let user: { token: string; id: string }
    beforeAll(async () => {
      user = await s.user('Mallory target')
    })

    it('refuses return paths that leave this server, storing no state and contacting no provider', async () => {
      const states = await stateKeys()
      const calls = fakes.github.requests.length
      for (const bad of [
        '//evil.com',
        'https://evil.com',
        '/\\evil.com',
        'javascript:alert(1)',
        '/\t/evil.com',
        '/\n/evil.com',
        '/.//evil.com',
        'evil.com',
        '',
        '\\\\evil.com',
        '/ok?next=//evil.com',
        '/%0d%0aLocation:x'.replace('%0d%0a', '\r\n'),
      ]) {
        const res = await failure(authorize(api(s, user.token), 'github', bad))
        expect(res.status, JSON.stringify(bad)).toBe(400)
        expect(res).toMatchObject({
          code: 'VALIDATION_FAILED',
          details: { issues: [{ location: 'query', path: 'returnPath' }] },
        })
      }
      expect(await stateKeys()).toBe(states)
      expect(fakes.github.requests.length).toBe(calls)
      for (const good of ['/', '/settings', '/a/b?c=d&e=%2F%2F#f']) {
        expect((await authorize(api(s, user.token), 'github', good)).url, good).toMatch(/^http/)
      }
    })

    it('names the provider when it is unknown, and state or code when missing', async () => {
      for (const path of [
        '/v1/integrations/git/sourceforge/authorize',
        '/v1/integrations/git/sourceforge/callback?code=x&state=y',
      ]) {
        const res = await s.request(path, { token: user.token })
        expect(res.status).toBe(400)
        expect(((await res.json()) as ErrorBody).details.issues[0]).toMatchObject({
          location: 'params',
          path: 'provider',
        })
      }
      const noState = await callback(`${s.url}/v1/integrations/git/github/callback?code=abc`)
      expect(noState.body!.details.issues[0]).toMatchObject({ path: 'state' })
      const noCode = await callback(`${s.url}/v1/integrations/git/github/callback?state=abc`)
      expect(noCode.body!.details.issues[0]).toMatchObject({ path: 'code' })
    })

    it('a provider this server has no client for is a 400 naming provider', async () => {
      const bare = await startServer()
      try {
        const u = await bare.user()
        const res = await failure(authorize(clientFor(bare, u.token), 'github'))
        expect(res.status).toBe(400)
        expect((res.details!.issues as unknown[])[0]).toMatchObject({
          path: 'provider',
          message: expect.stringMatching(/not configured/),
        })
      } finally {
        await bare.close()
      }
    })
  })
})

describe('a task clones over HTTPS with the connected account, its token added at the egress proxy (podman)', () => {
  let s: TestServer
  let provider: FakeGitProvider
  let gitHost: FakeGitServer
  let clock: TestServer['clock'] | undefined
  const marker = `hello-from-the-fake-git-host-${Date.now().toString(36)}`

  beforeAll(async () => {
    const address = hostAddress()
    const tls = selfSignedCert({ ips: [address] })
    provider = await startFakeGitProvider({ provider: 'github', now: () => clock!.now() })
    // On this machine's own address: the container has no network; its git goes through the broker's proxy, on the host.
    gitHost = await startFakeGitServer({
      tls,
      host: address,
      authorize: (user, password) => user === 'x-access-token' && provider.tokenOwner(password) === 'octo-github',
    })
    gitHost.createRepo('demo', { 'README.md': `${marker}\n` })
    const { info, runtime } = engineRuntime('podman')
    s = await startServer({
      runtime,
      pool: { image: info.image, min: 0, max: 2, name: uniquePoolName('git-clone'), spec: { network: 'none' } },
      runner: { bundleDir: RUNNER_BUNDLE },
      gitProviders: { github: { ...provider.config(), gitHost: `${address}:${gitHost.port}`, gitCaCert: tls.cert } },
      // The proxy applies the default environment's policy: an allowlist (the profile's Git host joins it) that may name loopback.
      environments: {
        caps: { ...DEFAULT_ENVIRONMENT_CAPS, defaultPolicy: 'allowlist', allowPrivateDestinations: true },
      },
    })
    clock = s.clock
    await s.berth.ready
  })
  afterAll(async () => {
    await s?.close()
    await gitHost?.close()
    await provider?.close()
  })

  it('clones with the token added at the proxy; the token is in no event, result, env dump or gitconfig', async () => {
    const user = await s.user()
    const call = api(s, user.token)
    const auth = await authorize(call, 'github', '/')
    const back = await callback(await consent(auth.url))
    const accountId = new URL(back.location!, 'http://x').searchParams.get('account')!
    expect(accountId).toMatch(/^git_/)
    // The token the callback got has expired by the time the task runs: the task gets a refreshed one.
    clock!.advance(9 * 3_600_000)
    const key = await call.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
    const profile = await call.profiles.create({
      body: {
        name: 'Cloner',
        slug: 'cloner',
        api_key_id: key.id,
        default_tools: ['Bash'],
        git_account_ids: [accountId],
      },
    })

    const clone = JSON.stringify({
      command: `cd /tmp && git clone https://${hostAddress()}:${gitHost.port}/demo.git repo && cat repo/README.md`,
    })
    const dump = JSON.stringify({
      command: 'env; echo ---; cat ~/.gitconfig; echo ---; git config --list --show-origin',
    })
    const sub = await call.tasks.submit({
      body: {
        mode: 'batch',
        profile_id: profile.id,
        prompt: `[[berth:tool Bash ${clone}]] [[berth:tool Bash ${dump}]] [[berth:text cloned]]`,
      },
    })
    const task = await waitForTask(call, sub.task_id)
    const { events } = await call.tasks.events({ params: { id: sub.task_id }, query: { limit: 100 } })
    expect(task.status, JSON.stringify({ task, events })).toBe('completed')
    const results = events.filter((e) => e.type === 'tool_result')
    expect(results).toHaveLength(2)
    expect(results[0]).toMatchObject({ is_error: false, output: expect.stringContaining(marker) })

    // The Git host was asked with the refreshed token, as the helper's username.
    expect(provider.requests.filter((r) => r.grant_type === 'refresh_token').map((r) => r.status)).toEqual([200])
    // Every request reached the host authenticated: the proxy adds the token before git is challenged.
    expect(gitHost.requests.length).toBeGreaterThan(0)
    for (const r of gitHost.requests) expect(r).toMatchObject({ status: 200, username: 'x-access-token' })

    const envDump = String(results[1]!.output)
    // No credential helper in the container: git only knows the proxy and the broker's CA.
    expect(envDump).not.toContain('credential.helper')
    // The proxy's password is the run's capability token, redacted from events like any credential.
    expect(envDump).toMatch(/HTTPS_PROXY=http:\/\/berth:\[REDACTED\]@127\.0\.0\.1:\d+/)
    expect(envDump).toContain('GIT_SSL_CAINFO=')
    const tokens = provider.issuedTokens()
    expect(tokens.length).toBe(4)
    const everything = [JSON.stringify(events), JSON.stringify(task), await storageDump(s)].join('\n')
    for (const t of tokens) expect(everything).not.toContain(t)
  }, 120_000)
})
