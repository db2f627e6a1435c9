/**
 * The OAuth-connected integrations over real HTTP, each against its local fake
 * (`@berth/testkit/providers`): the chat-workspace provider (Slack-shaped: OAuth v2 with
 * token rotation, `chat.postMessage`, signed Events API requests) and the mail provider
 * (Gmail-shaped: Google OAuth with PKCE and offline access, userinfo, `messages.send`, here
 * notified by a real task on Podman). For each: authorize → callback → integration stored
 * and masked → a notification delivered → token refresh after expiry → revoked grant →
 * needs reconnection → disconnect; and the refusals: forged, replayed and expired states,
 * and chat events with bad signatures, stale timestamps or missing headers.
 */
import {
  startFakeChatProvider,
  startFakeMailProvider,
  type FakeChatProvider,
  type FakeMailProvider,
} from '@berth/testkit/providers'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import type { BerthClient, BerthError } from '@berth/client'
import { clientFor, failure, startServer, type TestServer } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

/** An error answer read raw (a browser's callback is no client call). */
type ErrorBody = {
  code: string
  error: string
  details: { issues: { location: string; path: string; message: string }[] }
}
type Type = 'chatprovider' | 'mailprovider'
const HOUR = 3_600_000
const MASK = '••••••••'

/** Everything the server stores, as text (tokens may only be there encrypted). */
async function storageDump(s: TestServer): Promise<string> {
  const keys = await s.berth.storage.getKeys()
  const values = await Promise.all(keys.map((k) => s.berth.storage.getItem(k)))
  return keys.map((k, i) => `${k} ${JSON.stringify(values[i])}`).join('\n')
}

/** A caller's typed client; every response text is kept in `seen` (to scan for token plaintext). */
const client = (s: TestServer, token: string, seen: string[]): BerthClient => clientFor(s, token, seen)
/** The authorize call of a provider's flow, as the caller. */
const authorize = (api: BerthClient, type: Type, returnPath?: string) =>
  api.request(`integrations.${type}.authorize`, { query: returnPath === undefined ? {} : { returnPath } })
/** An integration's config as the API shows it (secret fields masked). */
const configOf = async (api: BerthClient, id: string) =>
  (await api.integrations.get({ params: { id } })).config as Record<string, unknown>
/** The delivery of a refused test notification. */
const deliveryOf = (err: BerthError) => err.details?.delivery as { error: string }

/** The provider's consent: where it sends the browser back. */
async function consent(authorizeUrl: string): Promise<URL> {
  const res = await fetch(authorizeUrl, { redirect: 'manual' })
  expect(res.status).toBe(302)
  return new URL(res.headers.get('location')!)
}

/** Hit a callback as a browser (no Berth credentials unless `token`). */
async function callback(
  url: URL | string,
  token?: string,
): Promise<{ status: number; location: string | null; body: ErrorBody | null; text: string }> {
  const res = await fetch(url, { redirect: 'manual', headers: token ? { authorization: `Bearer ${token}` } : {} })
  const text = await res.text()
  return {
    status: res.status,
    location: res.headers.get('location'),
    body: text ? (JSON.parse(text) as ErrorBody) : null,
    text,
  }
}

/** authorize → consent → callback; the redirect back, parsed. */
async function connect(api: BerthClient, type: Type, returnPath = '/settings/integrations') {
  const auth = await authorize(api, type, returnPath)
  const back = await callback(await consent(auth.url))
  expect(back.status, back.text).toBe(302)
  const location = new URL(back.location!, 'http://return.invalid')
  return { location, id: location.searchParams.get('id'), flags: Object.fromEntries(location.searchParams) }
}

/**
 * Forged, replayed, expired, another flow's and another caller's states are all 400 naming
 * `state`, and nothing is stored; the genuine callback still works, once.
 */
async function refusesBadStates(
  s: TestServer,
  type: Type,
  owner: { token: string },
  other: { token: string },
  tokenRequests: () => number,
) {
  const seen: string[] = []
  const call = client(s, owner.token, seen)
  const total = async (token: string) => (await client(s, token, seen).integrations.list({ query: { type } })).total
  const before = { mine: await total(owner.token), theirs: await total(other.token), exchanges: tokenRequests() }
  const start = async () => consent((await authorize(call, type)).url)
  const refused = async (url: URL | string, token?: string) => {
    const r = await callback(url, token)
    expect(r.status, r.text).toBe(400)
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

  const cb = await start()
  const [nonce, exp, sig] = cb.searchParams.get('state')!.split('.') as [string, string, string]
  expect(await refused(withState(cb, `${'a'.repeat(32)}.${exp}.${sig}`))).toMatch(/unknown/)
  expect(
    await refused(withState(cb, `${nonce}.${exp}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`)),
  ).toMatch(/signature/)
  expect(await refused(withState(cb, `${nonce}.${(Number.parseInt(exp, 36) + HOUR).toString(36)}.${sig}`))).toMatch(
    /signature/,
  )
  expect(await refused(withState(cb, 'not-a-state'))).toMatch(/malformed/)
  const otherType = type === 'chatprovider' ? 'mailprovider' : 'chatprovider'
  expect(await refused(new URL(cb.href.replace(`/api/${type}/callback`, `/api/${otherType}/callback`)))).toMatch(
    /another provider/,
  )
  expect(await refused(cb, other.token)).toMatch(/another caller/)
  // None of that used the state up: the owner's browser completes the flow (a reconnect of
  // the same account: no new integration) ...
  const done = await callback(cb)
  expect(done.status).toBe(302)
  expect(new URL(done.location!, 'http://x').searchParams.get('integration')).toBe('connected')
  // ... once.
  expect(await refused(cb)).toMatch(/already used/)
  // Expired: the browser comes back 11 minutes after consent.
  const late = await start()
  s.clock.advance(11 * 60_000)
  expect(await refused(late)).toMatch(/expired/)
  expect(await refused(late)).toMatch(/already used/)

  expect(tokenRequests()).toBe(before.exchanges + 1)
  expect(await total(owner.token)).toBe(before.mine)
  expect(await total(other.token)).toBe(before.theirs)
}

describe('chat-workspace provider (Slack-shaped fake)', () => {
  // Each test gets its own provider (one chat workspace) and server: none leans on another's state.
  let s: TestServer
  let chat: FakeChatProvider
  let clock: TestServer['clock'] | undefined
  let alice: { token: string; id: string }
  let bob: { token: string; id: string }
  let seen: string[]
  const events = () => `${s.url}/api/chatprovider/events`
  const tokenRequests = (grant?: string) =>
    chat.requests.filter((r) => r.path === '/api/oauth.v2.access' && (!grant || r.grant_type === grant))
  const posts = () => chat.requests.filter((r) => r.path === '/api/chat.postMessage')
  /** Alice's chatprovider integration, connected through the flow, optionally with a channel set. */
  const connected = async (channel?: string): Promise<string> => {
    const call = client(s, alice.token, seen)
    const { id } = await connect(call, 'chatprovider')
    if (channel)
      await call.integrations.update({
        params: { id: id! },
        body: { config: { ...(await configOf(call, id!)), channel } },
      })
    return id!
  }

  beforeEach(async () => {
    seen = []
    chat = await startFakeChatProvider({ now: () => clock!.now() })
    s = await startServer({ chatProvider: chat.config() })
    clock = s.clock
    alice = await s.user('Alice')
    bob = await s.user('Bob')
  })
  afterEach(async () => {
    await s?.close()
    await chat?.close()
  })

  it('authorize answers the consent URL with a signed state, the callback redirect URI and the bot scopes', async () => {
    const res = await authorize(client(s, alice.token, seen), 'chatprovider', '/settings')
    const url = new URL(res.url)
    expect(`${url.origin}${url.pathname}`).toBe(chat.config().authorizeUrl)
    expect(Object.fromEntries(url.searchParams)).toEqual({
      response_type: 'code',
      client_id: chat.clientId,
      redirect_uri: `${s.url}/api/chatprovider/callback`,
      scope: 'chat:write,app_mentions:read',
      state: expect.stringMatching(/^[a-z0-9]{32}\.[a-z0-9]+\.[A-Za-z0-9_-]{43}$/),
    })
    expect(JSON.stringify(res)).not.toContain(chat.clientSecret)
    expect((await s.request('/v1/integrations/chatprovider/authorize')).status).toBe(401)
  })

  it('connects: consent → callback → a chatprovider integration, masked, its tokens in no response and only encrypted in storage', async () => {
    const call = client(s, alice.token, seen)
    const { location, id: created, flags } = await connect(call, 'chatprovider', '/settings/integrations?tab=chat#top')
    expect(location.pathname).toBe('/settings/integrations')
    expect(location.hash).toBe('#top')
    expect(flags).toEqual({
      tab: 'chat',
      integration: 'connected',
      type: 'chatprovider',
      id: expect.stringMatching(/^int_[a-z0-9]+$/),
    })
    const id = created!
    expect(tokenRequests('authorization_code').map((r) => r.status)).toEqual([200])

    const one = await call.integrations.get({ params: { id } })
    expect(one).toEqual({
      id,
      type: 'chatprovider',
      config: {
        channel: null,
        team_id: 'T0ACME',
        team_name: 'Acme',
        bot_user_id: chat.botUserId,
        access_token: MASK,
        refresh_token: MASK,
        expires_at: new Date(s.clock.now() + 12 * HOUR).toISOString(),
        scopes: ['chat:write', 'app_mentions:read'],
      },
      enabled: true,
      is_default: false,
      status: 'connected',
      scope: 'all',
      profile_ids: [],
      created_at: expect.any(String),
      updated_at: expect.any(String),
    })
    expect(await call.integrations.list({ query: { type: 'chatprovider' } })).toMatchObject({
      total: 1,
      integrations: [{ id }],
    })
    expect((await failure(client(s, bob.token, seen).integrations.get({ params: { id } }))).status).toBe(404)
    expect((await client(s, bob.token, seen).integrations.list()).total).toBe(0)
    // Created only through the flow (raw: the client's types do not offer this type).
    const direct = await s.request('/v1/integrations', {
      method: 'POST',
      token: alice.token,
      json: { type: 'chatprovider', config: { channel: '#general' } },
    })
    expect(direct.status).toBe(400)
    expect(((await direct.json()) as ErrorBody).details.issues[0]).toMatchObject({ path: 'type' })

    const tokens = chat.issuedTokens()
    expect(tokens).toHaveLength(2)
    const everything = [...seen, location.href, await storageDump(s)].join('\n')
    for (const t of tokens) expect(everything).not.toContain(t)
    expect(everything).not.toContain(chat.clientSecret)
  })

  it("the test notification: 502 with the delivery until a channel is set, 502 with the provider's error, then posted", async () => {
    const id = await connected()
    const call = client(s, alice.token, seen)
    const test = () => call.integrations.test({ params: { id } })
    const unset = await failure(test())
    expect(unset.status).toBe(502)
    expect(unset).toMatchObject({
      code: 'BAD_GATEWAY',
      details: { delivery: { status: 'failed', error: expect.stringMatching(/no channel is set/) } },
    })

    // A PATCH sets the channel; the fields the flow owns keep their values whatever it sends.
    const patched = await call.integrations.update({
      params: { id },
      body: { config: { channel: '#nowhere', team_id: 'T0EVIL', access_token: 'xoxb-mine' } },
    })
    expect(patched.config).toMatchObject({
      channel: '#nowhere',
      team_id: 'T0ACME',
      access_token: MASK,
      refresh_token: MASK,
    })
    const invalid = await failure(
      call.integrations.update({ params: { id }, body: { config: { channel: 'not a channel!' } } }),
    )
    expect(invalid.status).toBe(400)
    expect((invalid.details!.issues as unknown[])[0]).toMatchObject({ location: 'body', path: 'config.channel' })

    const missing = await failure(test())
    expect(missing.status).toBe(502)
    expect(missing).toMatchObject({
      code: 'BAD_GATEWAY',
      details: {
        delivery: {
          status: 'failed',
          response_status: 200,
          error: 'the chat provider refused the message: channel_not_found',
        },
      },
    })
    expect(posts().at(-1)).toMatchObject({ status: 200, error: 'channel_not_found' })

    await call.integrations.update({
      params: { id },
      body: { config: { ...(patched.config as Record<string, unknown>), channel: '#alerts' } },
    })
    const ok = await test()
    expect(ok).toMatchObject({
      integration_id: id,
      event: 'integration.test',
      status: 'succeeded',
      response_status: 200,
    })
    expect(chat.messages).toEqual([
      {
        channel: 'C0ALERTS',
        text: '*Berth: test notification*\nThis is a test notification: the integration works.',
        blocks: null,
        thread_ts: null,
        ts: expect.any(String),
        team_id: 'T0ACME',
      },
    ])
    const deliveries = await call.integrations.deliveries({ params: { id } })
    expect(deliveries.deliveries.map((d) => d.status)).toEqual(['succeeded', 'failed', 'failed'])
  })

  it('refreshes the expired access token with the refresh token (rotated) before posting, once', async () => {
    const id = await connected('#alerts')
    const call = client(s, alice.token, seen)
    const before = (await configOf(call, id)).expires_at as string
    const posted = posts().length
    s.clock.advance(13 * HOUR)
    await call.integrations.test({ params: { id } })
    expect(tokenRequests('refresh_token').map((r) => ({ status: r.status, error: r.error }))).toEqual([
      { status: 200, error: undefined },
    ])
    // Refreshed before posting: one post, with the new token (the old one would have been refused as token_expired).
    expect(
      posts()
        .slice(posted)
        .map((r) => r.error ?? 'ok'),
    ).toEqual(['ok'])
    expect(chat.messages).toHaveLength(1)
    const after = await configOf(call, id)
    expect(Date.parse(after.expires_at as string)).toBe(s.clock.now() + 12 * HOUR)
    expect(after.expires_at).not.toBe(before)
    await call.integrations.test({ params: { id } })
    expect(tokenRequests('refresh_token')).toHaveLength(1)
    // Rotation issued a new access and refresh token: none of the four is readable anywhere.
    expect(chat.issuedTokens()).toHaveLength(4)
    const everything = [...seen, await storageDump(s)].join('\n')
    for (const t of chat.issuedTokens()) expect(everything).not.toContain(t)
  })

  it('a token the provider refuses while it looks current is refreshed and the post tried once more', async () => {
    const id = await connected('#alerts')
    chat.failNext('invalid_auth')
    const api = client(s, alice.token, seen)
    expect(await api.integrations.test({ params: { id } })).toMatchObject({ status: 'succeeded' })
    expect(
      posts()
        .slice(-2)
        .map((r) => r.error),
    ).toEqual(['invalid_auth', undefined])
    expect(tokenRequests('refresh_token').map((r) => r.status)).toEqual([200])
    expect((await api.integrations.get({ params: { id } })).status).toBe('connected')
  })

  it('records signed events: url_verification answered, an app mention recorded once (retries too) and listed', async () => {
    const id = await connected()
    const challenge = await chat.sendEvent(
      events(),
      chat.urlVerification('3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P'),
    )
    expect(challenge.status).toBe(200)
    expect(await challenge.json()).toEqual({ challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' })

    const mention = chat.messageEvent('deploy the docs please')
    const first = await chat.sendEvent(events(), mention)
    expect({ status: first.status, body: await first.json() }).toEqual({ status: 200, body: { ok: true, recorded: 1 } })
    // The provider retries an event it thinks was not acknowledged: recorded once.
    const retry = await chat.sendEvent(events(), mention)
    expect(await retry.json()).toEqual({ ok: true, recorded: 0 })
    const plain = await chat.sendEvent(events(), chat.messageEvent('lunch?', { mention: false, channel: 'C0ALERTS' }))
    expect(await plain.json()).toEqual({ ok: true, recorded: 1 })
    // A workspace nobody connected: acknowledged, nothing recorded.
    const elsewhere = await chat.sendEvent(events(), { ...chat.messageEvent('hi'), team_id: 'T0OTHER' })
    expect(await elsewhere.json()).toEqual({ ok: true, recorded: 0 })

    const call = client(s, alice.token, seen)
    const list = await call.integrations.events({ params: { id } })
    expect(list).toEqual({
      total: 2,
      next_cursor: null,
      events: [
        {
          event_id: expect.any(String),
          type: 'message',
          subtype: null,
          channel: 'C0ALERTS',
          user: 'U0ALICE',
          text: 'lunch?',
          mentions_bot: false,
          event_time: expect.any(String),
          received_at: expect.any(String),
        },
        {
          event_id: (mention as { event_id: string }).event_id,
          type: 'app_mention',
          subtype: null,
          channel: 'C0GENERAL',
          user: 'U0ALICE',
          text: `<@${chat.botUserId}> deploy the docs please`,
          mentions_bot: true,
          event_time: new Date(s.clock.now() - (s.clock.now() % 1000)).toISOString(),
          received_at: new Date(s.clock.now()).toISOString(),
        },
      ],
    })
    expect((await failure(client(s, bob.token, seen).integrations.events({ params: { id } }))).status).toBe(404)
  })

  it('refuses events with a bad signature, a stale or malformed timestamp or missing headers: 401, nothing recorded', async () => {
    const id = await connected()
    const call = client(s, alice.token, seen)
    const recorded = async () => (await call.integrations.events({ params: { id } })).total
    const before = await recorded()
    const now = Math.floor(s.clock.now() / 1000)
    const ev = chat.messageEvent('rm -rf please')
    const refused = async (res: Response) => {
      expect(res.status).toBe(401)
      expect(res.headers.get('content-type')).toMatch(/^application\/json/)
      const body = (await res.json()) as ErrorBody
      expect(body).toMatchObject({ code: 'UNAUTHORIZED', error: expect.any(String) })
      return body.error as string
    }
    expect(await refused(await chat.sendEvent(events(), ev, { secret: 'not-the-signing-secret' }))).toMatch(/signature/)
    // A signature of another body (the body was tampered with on the way).
    expect(
      await refused(
        await chat.sendEvent(events(), ev, {
          signature: chat.signatureHeaders(JSON.stringify({ ...ev, team_id: 'T0X' }))['x-signature'],
        }),
      ),
    ).toMatch(/signature/)
    expect(await refused(await chat.sendEvent(events(), ev, { signature: 'v0=' }))).toMatch(/signature/)
    expect(await refused(await chat.sendEvent(events(), ev, { timestamp: now - 301 }))).toMatch(/5 minutes/)
    expect(await refused(await chat.sendEvent(events(), ev, { timestamp: now + 301 }))).toMatch(/5 minutes/)
    expect(await refused(await chat.sendEvent(events(), ev, { omit: ['x-signature'] }))).toMatch(/required/)
    expect(await refused(await chat.sendEvent(events(), ev, { omit: ['x-request-timestamp'] }))).toMatch(/required/)
    const body = JSON.stringify(ev)
    expect(
      await refused(
        await fetch(events(), {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-request-timestamp': 'yesterday',
            'x-signature': chat.signatureHeaders(body)['x-signature'],
          },
          body,
        }),
      ),
    ).toMatch(/5 minutes/)
    // A challenge is not echoed without a good signature either.
    expect(await refused(await chat.sendEvent(events(), chat.urlVerification('abc'), { secret: 'forged' }))).toMatch(
      /signature/,
    )
    expect(await recorded()).toBe(before)
    // Within the window (299 s old) and signed: accepted.
    const fine = await chat.sendEvent(events(), ev, { timestamp: now - 299 })
    expect(await fine.json()).toEqual({ ok: true, recorded: 1 })
    expect(await recorded()).toBe(before + 1)
  })

  it('without a signing secret configured, every event is refused', async () => {
    const bare = await startServer()
    try {
      const res = await chat.sendEvent(`${bare.url}/api/chatprovider/events`, chat.urlVerification('abc'), {
        timestamp: Math.floor(bare.clock.now() / 1000),
      })
      expect(res.status).toBe(401)
      const u = await bare.user()
      const auth = await failure(authorize(clientFor(bare, u.token), 'chatprovider'))
      expect(auth.status).toBe(404)
      expect(auth.message).toMatch(/no chat provider configured/)
    } finally {
      await bare.close()
    }
  })

  it('refuses forged, replayed, expired, other-flow and other-caller states with nothing stored', async () => {
    await connected() // the good callback below is then a reconnect: no new integration
    await refusesBadStates(s, 'chatprovider', alice, bob, () => tokenRequests('authorization_code').length)
  })

  it('a declined consent goes back to the return path with an error and stores nothing', async () => {
    const carol = await s.user('Carol')
    chat.declineNext()
    const { flags } = await connect(client(s, carol.token, seen), 'chatprovider', '/settings')
    expect(flags).toEqual({ integration: 'error', type: 'chatprovider', reason: 'access_denied' })
    expect((await client(s, carol.token, seen).integrations.list()).total).toBe(0)
  })

  it('a revoked grant marks the integration needs_reconnect: the test fails at once, without calling the provider', async () => {
    const id = await connected('#alerts')
    const call = client(s, alice.token, seen)
    chat.revokeAll()
    const res = await failure(call.integrations.test({ params: { id } }))
    expect(res.status).toBe(502)
    expect(deliveryOf(res)).toMatchObject({
      status: 'failed',
      error: expect.stringMatching(/token_revoked.*needs reconnecting/),
    })
    expect(posts().at(-1)!.error).toBe('token_revoked')
    expect(tokenRequests('refresh_token').at(-1)).toMatchObject({ status: 200, error: 'invalid_refresh_token' })
    expect((await call.integrations.get({ params: { id } })).status).toBe('needs_reconnect')
    expect(s.logs.some((l) => l.includes('"level":"warn"') && l.includes('needs reconnecting'))).toBe(true)

    const calls = chat.requests.length
    const again = await failure(call.integrations.test({ params: { id } }))
    expect(again.status).toBe(502)
    expect(deliveryOf(again).error).toMatch(/needs reconnecting/)
    expect(chat.requests.length).toBe(calls)

    // Connecting the same workspace again restores the same integration, channel kept.
    const { id: back } = await connect(call, 'chatprovider')
    expect(back).toBe(id)
    const restored = await call.integrations.get({ params: { id } })
    expect(restored).toMatchObject({ status: 'connected', config: { channel: '#alerts', access_token: MASK } })
    await call.integrations.test({ params: { id } })
    expect((await call.integrations.list({ query: { type: 'chatprovider' } })).total).toBe(1)
  })

  it('disconnect deletes the integration, its events and revokes the grant at the provider; a repeat is 404', async () => {
    const id = await connected()
    expect(await (await chat.sendEvent(events(), chat.messageEvent('recorded first'))).json()).toEqual({
      ok: true,
      recorded: 1,
    })
    const call = client(s, alice.token, seen)
    const grants = chat.activeGrants()
    expect(grants).toBe(1)
    expect((await failure(client(s, bob.token, seen).integrations.delete({ params: { id } }))).status).toBe(404)
    await call.integrations.delete({ params: { id } })
    expect(chat.activeGrants()).toBe(0)
    expect(chat.requests.at(-1)).toMatchObject({ path: '/api/auth.revoke', status: 200 })
    expect(chat.requests.at(-1)!.error).toBeUndefined()
    expect((await failure(call.integrations.get({ params: { id } }))).status).toBe(404)
    expect((await failure(call.integrations.events({ params: { id } }))).status).toBe(404)
    expect((await failure(call.integrations.delete({ params: { id } }))).status).toBe(404)
    const keys = await s.berth.storage.getKeys()
    expect(keys.filter((k) => k.includes(id))).toEqual([])
    // Events for the workspace now reach nobody.
    expect(await (await chat.sendEvent(events(), chat.messageEvent('anyone?'))).json()).toEqual({
      ok: true,
      recorded: 0,
    })
    const everything = [...seen, await storageDump(s)].join('\n')
    for (const t of chat.issuedTokens()) expect(everything).not.toContain(t)
  })
})

describe('mail provider (Gmail-shaped fake), notified by a real task on podman', () => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let mail: FakeMailProvider
  let clock: TestServer['clock'] | undefined
  const seen: string[] = []
  let call: BerthClient
  const tokenRequests = (grant?: string) =>
    mail.requests.filter((r) => r.path === '/token' && (!grant || r.grant_type === grant))
  const sends = () => mail.requests.filter((r) => r.path === '/gmail/v1/users/me/messages/send')

  beforeAll(async () => {
    mail = await startFakeMailProvider({ now: () => clock!.now() })
    t = await taskServer('podman', {
      berth: { mailProvider: mail.config(), notifications: { attempts: 2, backoffMs: 100, timeoutMs: 5000 } },
    })
    clock = t.s.clock
    call = client(t.s, t.token, seen)
  })
  afterAll(async () => {
    await t?.s.close()
    await mail?.close()
    if (t) expect(await sweep(t.runtime, t.pool)).toBe(0)
  })
  // Each test connects its own integration and counts the provider's traffic from its own
  // start; what it connected goes after it, so no test hears another's notifications.
  afterEach(async () => {
    for (const i of (await call.integrations.list({ query: { type: 'mailprovider' } })).integrations)
      await call.integrations.delete({ params: { id: (i as { id: string }).id } })
  })
  const connected = async (): Promise<string> => (await connect(call, 'mailprovider', '/')).id!

  it('authorize answers the consent URL with PKCE S256 and offline access', async () => {
    const res = await authorize(call, 'mailprovider')
    const url = new URL(res.url)
    expect(`${url.origin}${url.pathname}`).toBe(mail.config().authorizeUrl)
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      client_id: mail.clientId,
      redirect_uri: `${t.s.url}/api/mailprovider/callback`,
      scope: 'openid email https://www.googleapis.com/auth/gmail.send',
      access_type: 'offline',
      prompt: 'consent',
      code_challenge_method: 'S256',
      code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    })
  })

  it('connects: a mailprovider integration for the mailbox, masked, recipients defaulting to the mailbox', async () => {
    const [exchanges, issued] = [tokenRequests('authorization_code').length, mail.issuedTokens().length]
    const { id: created, flags } = await connect(call, 'mailprovider', '/')
    expect(flags).toMatchObject({ integration: 'connected', type: 'mailprovider' })
    const id = created!
    // The code exchange carried the PKCE verifier the fake checked.
    expect(tokenRequests('authorization_code').slice(exchanges)).toEqual([
      expect.objectContaining({ status: 200, pkce: true }),
    ])
    const one = await call.integrations.get({ params: { id } })
    expect(one).toMatchObject({
      type: 'mailprovider',
      status: 'connected',
      enabled: true,
      config: {
        recipients: [mail.user.email],
        email: mail.user.email,
        account_id: mail.user.sub,
        access_token: MASK,
        refresh_token: MASK,
        expires_at: new Date(t.s.clock.now() + 3599_000).toISOString(),
        scopes: ['openid', 'email', 'https://www.googleapis.com/auth/gmail.send'],
      },
    })
    const everything = [...seen, await storageDump(t.s)].join('\n')
    expect(mail.issuedTokens().slice(issued)).toHaveLength(2)
    for (const tok of mail.issuedTokens()) expect(everything).not.toContain(tok)
    expect(everything).not.toContain(mail.clientSecret)
  })

  it('a completed task is mailed through the send API from the mailbox to the recipients', async () => {
    const id = await connected()
    const sent = mail.sent.length
    const patched = await call.integrations.update({
      params: { id },
      body: { config: { recipients: ['ops@example.test', mail.user.email], email: 'evil@example.test' } },
    })
    expect(patched.config).toMatchObject({
      recipients: ['ops@example.test', mail.user.email],
      email: mail.user.email,
      access_token: MASK,
    })

    const task = await t.run({ prompt: 'Report. [[berth:text All green: 3 checks passed, über gut.]]' })
    expect(task.status).toBe('completed')
    await vi.waitFor(() => expect(mail.sent.slice(sent)).toHaveLength(1), 15_000)
    const m = mail.sent[sent]!
    expect(m).toMatchObject({
      from: mail.user.email,
      to: ['ops@example.test', mail.user.email],
      subject: `Berth: task ${task.task_id} completed`,
    })
    // A MIME charset name is case-insensitive (RFC 2045); nodemailer writes it in lower case.
    expect(m.headers).toMatchObject({
      from: mail.user.email,
      'x-berth-event': 'task.completed',
      'x-berth-delivery': expect.stringMatching(/^ntf_/),
      'content-type': expect.stringMatching(/^text\/plain; charset=utf-8$/i),
    })
    expect(m.text).toContain('All green: 3 checks passed, über gut.')
    expect(m.text).toContain(task.task_id)
    const deliveries = await vi.waitFor(async () => {
      const d = (await call.integrations.deliveries({ params: { id } })).deliveries
      expect(d).toHaveLength(1)
      return d
    }, 15_000)
    expect(deliveries[0]).toMatchObject({
      event: 'task.completed',
      status: 'succeeded',
      response_status: 200,
      attempt: 1,
    })
  })

  it('refreshes the expired access token with the refresh token (kept, not rotated) before sending', async () => {
    const issued = mail.issuedTokens().length
    const id = await connected()
    const [refreshes, sent] = [tokenRequests('refresh_token').length, sends().length]
    t.s.clock.advance(2 * HOUR)
    expect(await call.integrations.test({ params: { id } })).toMatchObject({ status: 'succeeded' })
    expect(
      tokenRequests('refresh_token')
        .slice(refreshes)
        .map((r) => r.status),
    ).toEqual([200])
    expect(
      sends()
        .slice(sent)
        .map((r) => r.status),
    ).toEqual([200])
    expect(mail.sent.at(-1)!.subject).toBe('Berth: test notification')
    const config = await configOf(call, id)
    expect(Date.parse(config.expires_at as string)).toBe(t.s.clock.now() + 3599_000)
    expect(config.refresh_token).toBe(MASK)
    const everything = [...seen, await storageDump(t.s)].join('\n')
    expect(mail.issuedTokens().slice(issued)).toHaveLength(3)
    for (const tok of mail.issuedTokens()) expect(everything).not.toContain(tok)
  })

  it('a revoked grant marks it needs_reconnect: the task notification is recorded failed and logged as a warning, the task unaffected', async () => {
    const id = await connected()
    const sent = mail.sent.length
    mail.revokeAll()
    const task = await t.run({ prompt: 'Again. [[berth:text Done.]]' })
    expect(task.status).toBe('completed')
    const failed = await vi.waitFor(async () => {
      const d = (await call.integrations.deliveries({ params: { id } })).deliveries
      expect(d[0]).toMatchObject({ event: 'task.completed', status: 'failed', will_retry: false })
      return d[0]!
    }, 15_000)
    expect(failed.error).toMatch(/401.*UNAUTHENTICATED.*needs reconnecting/)
    expect(failed.response_status).toBe(401)
    expect(tokenRequests('refresh_token').at(-1)!.status).toBe(400)
    expect((await call.integrations.get({ params: { id } })).status).toBe('needs_reconnect')
    expect(mail.sent.length).toBe(sent)
    expect(
      t.s.logs.some((l) => l.includes('"level":"warn"') && l.includes('notification not delivered') && l.includes(id)),
    ).toBe(true)

    // The next one fails at once, without the provider.
    const calls = mail.requests.length
    const test = await failure(call.integrations.test({ params: { id } }))
    expect(test.status).toBe(502)
    expect(deliveryOf(test).error).toMatch(/needs reconnecting/)
    expect(mail.requests.length).toBe(calls)
  })

  it('refuses forged, replayed, expired, other-flow and other-caller states with nothing stored', async () => {
    const id = await connected()
    await call.integrations.update({
      params: { id },
      body: { config: { recipients: ['ops@example.test', mail.user.email] } },
    })
    mail.revokeAll()
    const other = await t.s.user('Bob')
    // The genuine callback inside reconnects the revoked mailbox (the same integration, settings kept).
    await refusesBadStates(
      t.s,
      'mailprovider',
      { token: t.token },
      other,
      () => tokenRequests('authorization_code').length,
    )
    expect(await call.integrations.get({ params: { id } })).toMatchObject({
      status: 'connected',
      config: { recipients: ['ops@example.test', mail.user.email] },
    })
  })

  it('disconnect deletes the integration and revokes the grant at the provider; a repeat is 404', async () => {
    const id = await connected()
    const grants = mail.activeGrants()
    expect(grants).toBeGreaterThan(0)
    await call.integrations.delete({ params: { id } })
    expect(mail.activeGrants()).toBe(grants - 1)
    expect(mail.requests.at(-1)).toMatchObject({ path: '/revoke', status: 200 })
    expect((await failure(call.integrations.get({ params: { id } }))).status).toBe(404)
    expect((await failure(call.integrations.delete({ params: { id } }))).status).toBe(404)
    const everything = [...seen, await storageDump(t.s)].join('\n')
    for (const tok of mail.issuedTokens()) expect(everything).not.toContain(tok)
  })
})
