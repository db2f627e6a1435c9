/**
 * The banking-data provider (a Teller-shaped connect widget) and the messenger bot (a
 * Telegram-shaped Bot API), each against its local fake in `@berth/testkit/providers`
 * over real HTTP: the real clients, real storage on disk (to check encryption at rest),
 * and for the thread flow a real engine running playbooks and their follow-ups.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SECRET_MASK } from '@berth/core'
import {
  startFakeBankProvider,
  startFakeMessenger,
  type FakeBankProvider,
  type FakeBot,
  type FakeChat,
  type FakeMessenger,
} from '@berth/testkit/providers'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { timingSafeEqual } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import type { BerthClient, BerthError, RouteInput } from '@berth/client'
import { clientFor, failure, startServer, type TestServer } from './helpers.js'
import { sweep } from './pool.helpers.js'
import { taskServer } from './tasks.helpers.js'

// The secret comparisons the services make, observed (they still compare for real).
vi.mock('node:crypto', async (original) => {
  const crypto = await original<typeof import('node:crypto')>()
  return { ...crypto, timingSafeEqual: vi.fn(crypto.timingSafeEqual) }
})
const compares = vi.mocked(timingSafeEqual)

/** A caller of a test server (typed client): every answer's text is kept, to scan for leaks. */
const caller = (s: TestServer, token: string, seen: string[]): BerthClient => clientFor(s, token, seen)
/** The issues of a refusal. */
const issues = (err: BerthError) => err.details?.issues as { location: string; path: string; message: string }[]
/** A POST of a body the client's types refuse, answered as raw JSON. */
async function rawPost(s: TestServer, token: string, path: string, json: unknown) {
  const res = await s.request(path, { method: 'POST', token, json })
  return {
    status: res.status,
    body: (await res.json()) as { details: { issues: { location: string; path: string }[] } },
  }
}

/** Every file's text under `dir`. */
function diskText(dir: string): string {
  const walk = (d: string): string[] =>
    readdirSync(d).flatMap((f) => (statSync(join(d, f)).isDirectory() ? walk(join(d, f)) : [join(d, f)]))
  return walk(dir)
    .map((f) => readFileSync(f, 'utf8'))
    .join('\n')
}

/** A server on real files under a temp dir (so "encrypted at rest" is checked on disk). */
async function fileServer(opts: Parameters<typeof startServer>[0]) {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-bank-messenger-'))
  const s = await startServer({
    dataDir,
    storage: createStorage({ driver: fsDriver({ base: join(dataDir, 'store') }) }),
    ...opts,
  })
  const close = async () => {
    await s.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
  return { s, dataDir, close }
}

describe('banking-data provider', () => {
  let bank: FakeBankProvider
  let srv: Awaited<ReturnType<typeof fileServer>>
  let s: TestServer
  const seen: string[] = []
  let alice: BerthClient
  let bob: BerthClient
  let aliceId: string
  let aliceToken: string

  beforeAll(async () => {
    bank = await startFakeBankProvider()
    srv = await fileServer({ bankProvider: { apiBaseUrl: bank.url, timeoutMs: 500 } })
    s = srv.s
    const a = await s.user('Alice')
    aliceId = a.id
    aliceToken = a.token
    alice = caller(s, a.token, seen)
    bob = caller(s, (await s.user('Bob')).token, seen)
  })
  afterAll(async () => {
    await srv.close()
    await bank.close()
  })

  const bankIntegrations = (call: BerthClient) =>
    call.integrations.list({ query: { type: 'bankprovider', limit: 100 } })
  const setConfig = (call: BerthClient, body: RouteInput<'integrations.bankprovider.config'>['body']) =>
    call.integrations.bankprovider.config({ body })
  const connectBank = (payload: RouteInput<'integrations.bankprovider.callback'>['body']) =>
    alice.integrations.bankprovider.callback({ body: payload })

  it("stores each caller's widget settings, with defaults, and validates them", async () => {
    const set = await setConfig(alice, { application_id: 'app_alice123', environment: 'sandbox' })
    expect(set).toEqual({
      application_id: 'app_alice123',
      environment: 'sandbox',
      products: ['balance', 'transactions'],
      select_account: 'multiple',
      updated_at: expect.any(String),
    })
    const again = await setConfig(alice, {
      application_id: 'app_alice123',
      environment: 'development',
      products: ['verify', 'balance'],
      select_account: 'single',
    })
    expect(again).toMatchObject({
      environment: 'development',
      products: ['verify', 'balance'],
      select_account: 'single',
    })
    expect(await setConfig(bob, { application_id: 'app_bob', environment: 'production' })).toMatchObject({
      application_id: 'app_bob',
    })

    for (const [body, field] of [
      [{ application_id: 'app_x', environment: 'staging' }, 'environment'],
      [{ application_id: 'has spaces', environment: 'sandbox' }, 'application_id'],
      [{ application_id: 'app_x', environment: 'sandbox', products: ['loans'] }, 'products.0'],
      [{ environment: 'sandbox' }, 'application_id'],
    ] as const) {
      // Raw: these bodies are outside what the client's types let a caller write.
      const res = await rawPost(s, aliceToken, '/v1/integrations/bankprovider/config', body)
      expect(res.status).toBe(400)
      expect(res.body.details.issues).toContainEqual(expect.objectContaining({ location: 'body', path: field }))
    }
    expect(
      (
        await s.request('/v1/integrations/bankprovider/config', {
          method: 'POST',
          json: { application_id: 'app_x', environment: 'sandbox' },
        })
      ).status,
    ).toBe(401)
  })

  it('the callback verifies the enrollment with the provider and stores a masked, encrypted integration', async () => {
    const payload = bank.enroll({ institution: 'Security Credit Union', accounts: 2 })
    const before = bank.requests.length
    const res = await connectBank(payload)
    // Verified with the token over Basic auth, as the provider's API wants it.
    expect(bank.requests.slice(before)).toEqual([
      { method: 'GET', path: '/accounts', authenticated: true, status: 200 },
    ])
    expect(res).toMatchObject({
      type: 'bankprovider',
      enabled: true,
      status: 'connected',
      config: {
        access_token: SECRET_MASK,
        enrollment_id: payload.enrollment.id,
        institution: 'Security Credit Union',
        user_id: payload.user.id,
        application_id: 'app_alice123',
        environment: 'development',
        accounts: [
          expect.objectContaining({
            name: 'Checking',
            type: 'depository',
            subtype: 'checking',
            last_four: expect.any(String),
          }),
          expect.objectContaining({ subtype: 'savings' }),
        ],
      },
    })
    const id = res.id
    expect((await alice.integrations.get({ params: { id } })).config).toMatchObject({ access_token: SECRET_MASK })
    expect(await bankIntegrations(alice)).toMatchObject({ integrations: [{ id }] })

    // The same enrollment connected again refreshes the one integration.
    const again = await connectBank(payload)
    expect(again.id).toBe(id)
    expect((await bankIntegrations(alice)).total).toBe(1)

    // A data source, not a channel: notifications skip it; its test checks the token still works.
    const profileKey = await alice.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    const profile = await alice.profiles.create({ body: { name: 'P', slug: 'p', api_key_id: profileKey.id } })
    expect((await s.berth.services.integrations.targetsFor(aliceId, profile.id)).map((t) => t.type)).not.toContain(
      'bankprovider',
    )
    const test = await alice.integrations.test({ params: { id } })
    expect(test).toMatchObject({ status: 'succeeded', response_status: 200 })
    bank.revoke(payload.accessToken)
    const refused = await failure(alice.integrations.test({ params: { id } }))
    expect(refused.status).toBe(502)
    expect(refused).toMatchObject({
      code: 'BAD_GATEWAY',
      details: { delivery: { status: 'failed', response_status: 403 } },
    })
    expect((await alice.integrations.get({ params: { id } })).status).toBe('needs_reconnect')

    // Another caller's integration is 404 everywhere and absent from their list.
    for (const [what, call] of [
      ['get', () => bob.integrations.get({ params: { id } })],
      ['update', () => bob.integrations.update({ params: { id }, body: { enabled: false } })],
      ['test', () => bob.integrations.test({ params: { id } })],
      ['delete', () => bob.integrations.delete({ params: { id } })],
    ] as const) {
      expect((await failure(call())).status, what).toBe(404)
    }
    expect((await bankIntegrations(bob)).total).toBe(0)
    expect((await alice.integrations.get({ params: { id } })).enabled).toBe(true)

    // The token is in no answer, on disk only encrypted, and in no log line.
    for (const text of seen) expect(text).not.toContain(payload.accessToken)
    expect(diskText(srv.dataDir)).not.toContain(payload.accessToken)
    expect(s.logs.join('\n')).not.toContain(payload.accessToken)
  })

  it('provider failures are 502 BAD_GATEWAY with the reason, and nothing is stored', async () => {
    const count = async () => (await bankIntegrations(alice)).total
    const start = await count()
    const payload = bank.enroll()
    try {
      bank.fail({ status: 503 })
      const down = await failure(connectBank(payload))
      expect(down.status).toBe(502)
      expect(down).toMatchObject({
        code: 'BAD_GATEWAY',
        details: {
          provider: 'bankprovider',
          reason: 'unavailable',
          provider_status: 503,
          provider_code: 'internal_server_error',
        },
      })

      bank.fail('hang')
      const t0 = performance.now()
      const hung = await failure(connectBank(payload))
      const waited = performance.now() - t0
      expect(hung.status).toBe(502)
      expect(hung).toMatchObject({ code: 'BAD_GATEWAY', details: { reason: 'unavailable', provider_status: null } })
      expect(hung.message).toMatch(/did not answer within 500 ms/)
      expect(waited).toBeGreaterThanOrEqual(450)
      expect(waited).toBeLessThan(5000)
    } finally {
      bank.fail(null)
    }

    const forged = await failure(connectBank({ ...payload, accessToken: 'token_not_issued_by_the_provider' }))
    expect(forged.status).toBe(502)
    expect(forged).toMatchObject({
      code: 'BAD_GATEWAY',
      details: { reason: 'unauthorized', provider_status: 403, provider_code: 'invalid_token' },
    })

    // A real token, but claimed for another enrollment.
    const mixed = await failure(
      connectBank({ ...payload, enrollment: { id: 'enr_someone_else', institution: { name: 'X' } } }),
    )
    expect(mixed.status).toBe(400)
    expect(issues(mixed)).toEqual([expect.objectContaining({ path: 'enrollment.id' })])

    // Raw: a body missing what the client's types require.
    const malformed = await rawPost(s, aliceToken, '/v1/integrations/bankprovider/callback', {
      accessToken: payload.accessToken,
      enrollment: { id: payload.enrollment.id },
    })
    expect(malformed.status).toBe(400)
    expect(malformed.body.details.issues.map((i) => i.path)).toEqual(
      expect.arrayContaining(['enrollment.institution', 'user']),
    )

    expect(await count()).toBe(start)
    // And once the provider answers again, the same payload connects.
    expect(await connectBank(payload)).toMatchObject({ status: 'connected' })
    expect(await count()).toBe(start + 1)
  })

  it('an unreachable provider is a 502 too', async () => {
    const closed = await startFakeBankProvider()
    await closed.close()
    const other = await startServer({ bankProvider: { apiBaseUrl: closed.url, timeoutMs: 500 } })
    try {
      const { token } = await other.user()
      const api = clientFor(other, token)
      const res = await failure(api.integrations.bankprovider.callback({ body: bank.enroll() }))
      expect(res.status).toBe(502)
      expect(res.details).toMatchObject({ reason: 'unavailable' })
      expect((await api.integrations.list()).total).toBe(0)
    } finally {
      await other.close()
    }
  })
})

describe('messenger bot', () => {
  let tg: FakeMessenger
  let srv: Awaited<ReturnType<typeof fileServer>>
  let s: TestServer
  const seen: string[] = []
  let users = 0

  beforeAll(async () => {
    tg = await startFakeMessenger()
    srv = await fileServer({ messenger: { apiBaseUrl: tg.url, timeoutMs: 500 } })
    s = srv.s
  })
  afterAll(async () => {
    await srv.close()
    await tg.close()
  })

  const config = (call: BerthClient) => call.integrations.messenger.config()
  const messengers = (call: BerthClient) => call.integrations.list({ query: { type: 'messenger' } })
  const setup = (call: BerthClient, bot_token: string) => call.integrations.messenger.setup({ body: { bot_token } })
  /** The bot's messages to `chatId` after index `from` of the fake's record. */
  const botSaid = (chatId: number, from: number) => tg.sent.slice(from).filter((m) => m.chat_id === chatId)
  const claimCode = async (call: BerthClient) => (await call.integrations.messenger.claim()).code
  /**
   * Each test's own caller, bot and chat (no test leans on another's state): with `setup`
   * the bot is connected (webhook registered), with `claimed` its chat is bound too.
   */
  const fresh = async (opts: { setup?: boolean; claimed?: boolean } = {}) => {
    const call = caller(s, (await s.user(`Caller ${++users}`)).token, seen)
    const bot = tg.createBot({ username: 'alice_berth_bot' })
    const chat = tg.chat()
    let id = ''
    if (opts.setup || opts.claimed) {
      id = (await setup(call, bot.token)).integration_id!
    }
    if (opts.claimed) {
      await tg.sendUpdate(bot.token, { chat, text: await claimCode(call) })
      expect((await config(call)).claim.chat?.id).toBe(chat.id)
    }
    return { call, bot, chat, id }
  }

  it('setup validates the token with the provider; a refused token or a failing provider stores nothing', async () => {
    const { call: alice, bot } = await fresh()
    expect(await config(alice)).toEqual({
      configured: false,
      integration_id: null,
      bot: null,
      webhook: null,
      claim: { claimed: false, chat: null, claimed_at: null, pending_code_expires_at: null },
    })

    const malformed = await failure(setup(alice, 'not a token'))
    expect(malformed.status).toBe(400)
    expect(issues(malformed)).toEqual([expect.objectContaining({ path: 'bot_token' })])

    const stranger = `${bot.id + 1}:AAthis-token-was-never-issued-by-them`
    const refused = await failure(setup(alice, stranger))
    expect(refused.status).toBe(400)
    expect(refused).toMatchObject({
      code: 'VALIDATION_FAILED',
      details: {
        issues: [
          expect.objectContaining({
            location: 'body',
            path: 'bot_token',
            message: expect.stringContaining('Unauthorized'),
          }),
        ],
      },
    })
    expect(tg.requests.at(-1)).toEqual({ method: 'getMe', status: 401 })

    for (const mode of [{ status: 502 }, 'hang'] as const) {
      tg.fail(mode)
      try {
        const down = await failure(setup(alice, bot.token))
        expect(down.status).toBe(502)
        expect(down).toMatchObject({
          code: 'BAD_GATEWAY',
          details: { provider: 'messenger', step: 'getMe', reason: 'unavailable' },
        })
      } finally {
        tg.fail(null)
      }
    }
    expect(tg.webhookOf(bot.token)).toBeNull()
    expect((await config(alice)).configured).toBe(false)
    expect((await messengers(alice)).total).toBe(0)
  })

  it('setup registers the webhook with a generated secret token and stores the bot token encrypted and masked', async () => {
    const { call: alice, bot, chat } = await fresh()
    const { call: bob } = await fresh()
    const res = await setup(alice, bot.token)
    expect(res).toEqual({
      configured: true,
      integration_id: expect.stringMatching(/^int_/),
      bot: { id: bot.id, username: 'alice_berth_bot', name: 'Berth' },
      webhook: { url: `${s.url}/api/messenger/webhook`, registered_at: expect.any(String), last_update_at: null },
      claim: { claimed: false, chat: null, claimed_at: null, pending_code_expires_at: null },
    })
    const hook = tg.webhookOf(bot.token)!
    expect(hook).toEqual({
      url: `${s.url}/api/messenger/webhook`,
      secret_token: expect.stringMatching(/^int_[a-z0-9]+-[a-z0-9]{64}$/),
      allowed_updates: ['message'],
    })
    expect(hook.secret_token!.startsWith(`${res.integration_id}-`)).toBe(true)

    const list = await messengers(alice)
    expect(list.total).toBe(1)
    expect(list.integrations[0]).toMatchObject({
      id: res.integration_id,
      type: 'messenger',
      config: { bot_token: SECRET_MASK, bot_username: 'alice_berth_bot', chat_id: null },
    })
    expect(await config(bob)).toMatchObject({ configured: false })

    // Setting the same bot up again rotates the secret: the old one stops working.
    const oldSecret = hook.secret_token!
    const again = await setup(alice, bot.token)
    expect(again.integration_id).toBe(res.integration_id)
    expect(tg.webhookOf(bot.token)!.secret_token).not.toBe(oldSecret)
    const stale = await tg.sendUpdate(bot.token, { chat, text: 'hello' }, { secretToken: oldSecret })
    expect(stale.status).toBe(401)
    expect((await messengers(alice)).total).toBe(1)
  })

  it('the claim: a code is issued, claimed once through the webhook, and reuse is refused with a reply', async () => {
    const { call: alice, bot, chat, id } = await fresh({ setup: true })
    const { call: bob } = await fresh()
    expect((await failure(bob.integrations.messenger.claim())).status).toBe(404)
    // Before a chat is claimed there is nowhere to deliver.
    expect((await failure(alice.integrations.test({ params: { id } }))).status).toBe(502)

    const issued = await alice.integrations.messenger.claim()
    expect(issued).toEqual({
      code: expect.stringMatching(/^BERTH-[A-Z0-9]{8}$/),
      expires_at: new Date(s.clock.now() + 10 * 60_000).toISOString(),
      bot_username: 'alice_berth_bot',
      instructions: expect.stringContaining('@alice_berth_bot'),
    })
    const code = issued.code
    expect((await config(alice)).claim.pending_code_expires_at).toBe(issued.expires_at)

    let mark = tg.sent.length
    const claimed = await tg.sendUpdate(bot.token, { chat, text: `/start ${code.toLowerCase()}` })
    expect(claimed.status).toBe(200)
    expect(JSON.parse(claimed.body)).toEqual({ ok: true })
    expect(botSaid(chat.id, mark)).toEqual([
      expect.objectContaining({
        text: expect.stringContaining('now connected'),
        reply_to_message_id: claimed.update.message.message_id,
      }),
    ])
    expect((await config(alice)).claim).toEqual({
      claimed: true,
      chat: { id: chat.id, type: 'private', title: 'ada' },
      claimed_at: expect.any(String),
      pending_code_expires_at: null,
    })

    // The same code from another chat: refused with a reply, the binding stays.
    const intruder = tg.chat({ first_name: 'Mallory', username: 'mallory' })
    mark = tg.sent.length
    expect((await tg.sendUpdate(bot.token, { chat: intruder, text: code })).status).toBe(200)
    expect(botSaid(intruder.id, mark)).toEqual([
      expect.objectContaining({ text: expect.stringContaining('already used') }),
    ])
    expect((await config(alice)).claim.chat?.id).toBe(chat.id)

    // Unknown and expired codes: refused too.
    mark = tg.sent.length
    await tg.sendUpdate(bot.token, { chat: intruder, text: 'BERTH-ZZZZ9999' })
    const late = await claimCode(alice)
    s.clock.advance(10 * 60_000 + 1000)
    await tg.sendUpdate(bot.token, { chat: intruder, text: late })
    expect(botSaid(intruder.id, mark).map((m) => m.text)).toEqual([
      expect.stringContaining('not valid or has expired'),
      expect.stringContaining('not valid or has expired'),
    ])
    expect((await config(alice)).claim.chat?.id).toBe(chat.id)

    // Other messages are acknowledged, unanswered; a redelivered update is not acted on twice.
    mark = tg.sent.length
    expect((await tg.sendUpdate(bot.token, { chat, text: 'hello bot' })).status).toBe(200)
    const newCode = await claimCode(alice)
    const delivery = await tg.sendUpdate(bot.token, { chat: intruder, text: newCode })
    expect((await tg.redeliver(bot.token, delivery.update)).status).toBe(200)
    expect(botSaid(chat.id, mark)).toEqual([])
    expect(botSaid(intruder.id, mark)).toHaveLength(1)
    expect((await config(alice)).claim.chat?.id).toBe(intruder.id)

    // Claim the first chat back; its test notification arrives there.
    await tg.sendUpdate(bot.token, { chat, text: await claimCode(alice) })
    mark = tg.sent.length
    expect(await alice.integrations.test({ params: { id } })).toMatchObject({ status: 'succeeded' })
    expect(botSaid(chat.id, mark)).toEqual([
      expect.objectContaining({ text: expect.stringContaining('test notification') }),
    ])
    expect((await config(alice)).webhook?.last_update_at).not.toBeNull()
  })

  it('a missing or wrong secret token is a 401 and nothing is done', async () => {
    const { call: alice, bot, chat } = await fresh({ claimed: true })
    const code = await claimCode(alice)
    const before = await config(alice)
    const sentBefore = tg.sent.length
    const requestsBefore = tg.requests.length
    const other = tg.chat()
    const id = before.integration_id!
    for (const secretToken of [
      null,
      '',
      'wrong',
      `${id}-${'0'.repeat(64)}`,
      `int_zzzzzzzzzzzzzzzzzzzz-${'0'.repeat(64)}`,
      `${tg.webhookOf(bot.token)!.secret_token}x`,
    ]) {
      const res = await tg.sendUpdate(bot.token, { chat: other, text: code }, { secretToken })
      expect(res.status, String(secretToken)).toBe(401)
      expect(JSON.parse(res.body)).toMatchObject({ code: 'UNAUTHORIZED' })
    }
    // Not even a malformed body is read without the token.
    const garbage = await fetch(`${s.url}/api/messenger/webhook`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': 'wrong' },
      body: '{"',
    })
    expect(garbage.status).toBe(401)
    expect(tg.sent.length).toBe(sentBefore)
    expect(tg.requests.length).toBe(requestsBefore)
    expect(await config(alice)).toEqual(before)
    // The code was not spent: it still claims (then the first chat takes the binding back).
    await tg.sendUpdate(bot.token, { chat: other, text: code })
    expect((await config(alice)).claim.chat?.id).toBe(other.id)
    await tg.sendUpdate(bot.token, { chat, text: await claimCode(alice) })
    // With the token, a body that is not an update is a 400.
    const bad = await fetch(`${s.url}/api/messenger/webhook`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-telegram-bot-api-secret-token': tg.webhookOf(bot.token)!.secret_token!,
      },
      body: '{"update_id":"x"}',
    })
    expect(bad.status).toBe(400)
  })

  it("a PATCH cannot move the claimed chat or replace the bot token; scope and enabled are the caller's", async () => {
    const { call: alice, chat, id } = await fresh({ claimed: true })
    const patched = await alice.integrations.update({
      params: { id },
      body: { config: { bot_token: 'x', chat_id: 999, note: 'mine' }, enabled: false },
    })
    expect(patched).toMatchObject({
      enabled: false,
      config: { bot_token: SECRET_MASK, chat_id: chat.id, bot_username: 'alice_berth_bot' },
    })
    expect((await config(alice)).claim.chat?.id).toBe(chat.id)
    expect((await alice.integrations.update({ params: { id }, body: { enabled: true } })).enabled).toBe(true)
    const mark = tg.sent.length
    await alice.integrations.test({ params: { id } })
    expect(botSaid(chat.id, mark)).toHaveLength(1)
  })

  it('keeps the bot token and webhook secret out of every answer, the disk and the logs', async () => {
    const { call: alice, bot, id } = await fresh({ claimed: true })
    // Every read that could echo them: the config, the list, one integration, a test delivery, a PATCH.
    await config(alice)
    await messengers(alice)
    await alice.integrations.get({ params: { id } })
    await alice.integrations.test({ params: { id } })
    await alice.integrations.update({ params: { id }, body: { config: { note: 'x' } } })
    const secret = tg.webhookOf(bot.token)!.secret_token!
    expect(seen.length).toBeGreaterThan(5)
    for (const text of seen) {
      expect(text).not.toContain(bot.token)
      expect(text).not.toContain(secret)
    }
    const disk = diskText(srv.dataDir)
    expect(disk).not.toContain(bot.token)
    expect(disk).not.toContain(secret)
    expect(s.logs.join('\n')).not.toContain(bot.token)
  })

  it('disconnecting removes the webhook at the provider, and its secret stops working', async () => {
    const { call: alice, bot, id } = await fresh({ claimed: true })
    const secret = tg.webhookOf(bot.token)!.secret_token!
    const url = tg.webhookOf(bot.token)!.url
    await alice.integrations.delete({ params: { id } })
    expect(tg.webhookOf(bot.token)).toBeNull()
    expect((await config(alice)).configured).toBe(false)
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': secret },
      body: JSON.stringify({ update_id: 1 }),
    })
    expect(res.status).toBe(401)
    expect((await failure(alice.integrations.messenger.claim())).status).toBe(404)
  })
})

describe('the messenger webhook, constant-time', () => {
  it('refuses a wrong secret for a real bot and a token naming no bot by the same path: one lookup, one comparison of equal lengths', async () => {
    const tg = await startFakeMessenger()
    // Every store read, to tell which lookups a request made.
    const storage = createStorage()
    const reads: string[] = []
    const getItem = storage.getItem.bind(storage)
    storage.getItem = ((key: string, ...rest: unknown[]) => {
      reads.push(key)
      return (getItem as (...a: unknown[]) => Promise<unknown>)(key, ...rest)
    }) as typeof storage.getItem
    const s = await startServer({ storage, messenger: { apiBaseUrl: tg.url } })
    try {
      const bot = tg.createBot()
      const { token } = await s.user()
      const id = (await clientFor(s, token).integrations.messenger.setup({ body: { bot_token: bot.token } }))
        .integration_id!
      const unknownId = 'int_zzzzzzzzzzzzzzzzzzzz'
      const trace = async (botId: string) => {
        reads.length = 0
        compares.mockClear()
        const res = await fetch(`${s.url}/api/messenger/webhook`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-telegram-bot-api-secret-token': `${botId}-${'0'.repeat(64)}`,
          },
          body: '{"update_id":1}',
        })
        expect(res.status).toBe(401)
        return {
          reads: reads.map((k) => k.replace(botId, '<id>')),
          compares: compares.mock.calls.map(([a, b]) => [a.byteLength, b.byteLength]),
          matched: compares.mock.results.map((r) => r.value),
        }
      }
      const known = await trace(id)
      const unknown = await trace(unknownId)
      // The bot that does not exist is looked up and compared (against a decoy) like a real one.
      expect(known).toEqual({ reads: [expect.stringContaining('<id>')], compares: [[32, 32]], matched: [false] })
      expect(unknown).toEqual(known)
    } finally {
      await s.close()
      await tg.close()
    }
  })
})

describe('messenger threads on podman', () => {
  let tg: FakeMessenger
  let t: Awaited<ReturnType<typeof taskServer>>
  let bot: FakeBot
  let chat: FakeChat

  beforeAll(async () => {
    tg = await startFakeMessenger()
    t = await taskServer('podman', { berth: { messenger: { apiBaseUrl: tg.url } } })
    bot = tg.createBot({ username: 'runs_bot' })
    chat = tg.chat()
    await t.api.integrations.messenger.setup({ body: { bot_token: bot.token } })
    const { code } = await t.api.integrations.messenger.claim()
    expect((await tg.sendUpdate(bot.token, { chat, text: code })).status).toBe(200)
    expect((await t.api.integrations.messenger.config()).claim.claimed).toBe(true)
  })
  afterAll(async () => {
    await t.s.close()
    await tg.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  it("a playbook run's result posts to the chat; a reply there claims the pb- workspace as a thread and continues its session", async () => {
    const pb = await t.api.playbooks.create({
      body: { profile_id: t.profileId, name: 'Digest', prompt: 'Write the digest. [[berth:text Digest ready.]]' },
    })
    const mark = tg.sent.length
    expect(await t.api.playbooks.run({ params: { id: pb.id } })).toMatchObject({ status: 'started' })
    const result = await vi.waitFor(() => {
      const m = tg.sent.slice(mark).find((x) => x.chat_id === chat.id)
      if (!m) throw new Error('no result posted yet')
      return m
    }, 90_000)
    expect(result.text).toMatch(/^Playbook “Digest” completed/)
    expect(result.text).toContain('Digest ready.')
    expect(result.text).toContain('Reply to this message')
    const [run] = (await t.api.playbooks.runs({ params: { id: pb.id } })).runs
    expect(run).toMatchObject({ status: 'completed', session_id: expect.stringMatching(/^pb-/) })
    const integrationId = (await t.api.integrations.messenger.config()).integration_id!
    const { deliveries } = await t.api.integrations.deliveries({ params: { id: integrationId } })
    expect(deliveries).toContainEqual(expect.objectContaining({ event: 'playbook_run.completed', status: 'succeeded' }))

    const workspaces = async () => (await t.api.workspaces.list({ query: { limit: 100 } })).workspaces
    const listed = async () => (await workspaces()).map((w) => w.id)
    expect(await listed()).not.toContain(run!.workspace_id)

    // A message that is not a reply to the thread continues nothing.
    await tg.sendUpdate(bot.token, { chat, text: 'Unrelated chatter.' })
    expect(await listed()).not.toContain(run!.workspace_id)

    // The reply comes straight away, while the run's container may still be being released
    // (its conversation saved): the follow-up waits for that and continues the session.
    const reply = await tg.sendUpdate(bot.token, {
      chat,
      text: 'What did I ask first? [[berth:recall]]',
      replyTo: result.message_id,
    })
    expect(reply.status).toBe(200)
    // Claimed as a thread: the workspace now shows in the list.
    const ws = (await workspaces()).find((w) => w.id === run!.workspace_id)
    expect(ws).toMatchObject({ session_id: run!.session_id })

    const answer = await vi.waitFor(() => {
      const m = tg.sent.find((x) => x.reply_to_message_id === reply.update.message.message_id)
      if (!m) throw new Error('no follow-up result yet')
      return m
    }, 90_000)
    // The follow-up ran in the run's session: the model recalls the run's own prompt.
    expect(answer.text).toContain('The first prompt was: Write the digest.')
    const { tasks } = await t.api.tasks.list({ query: { mode: 'session', limit: 100 } })
    const followUp = tasks.find((x) => x.prompt === 'What did I ask first? [[berth:recall]]')
    expect(followUp).toMatchObject({
      status: 'completed',
      session_id: run!.session_id,
      workspace_id: run!.workspace_id,
    })

    // The follow-up's answer is part of the thread: replying to it continues again.
    const second = await tg.sendUpdate(bot.token, {
      chat,
      text: 'One more. [[berth:text Still here.]]',
      replyTo: answer.message_id,
    })
    const again = await vi.waitFor(() => {
      const m = tg.sent.find((x) => x.reply_to_message_id === second.update.message.message_id)
      if (!m) throw new Error('no second result yet')
      return m
    }, 90_000)
    expect(again.text).toContain('Still here.')
  })
})

describe('permission requests in the messenger on podman', () => {
  let tg: FakeMessenger
  let t: Awaited<ReturnType<typeof taskServer>>
  let bot: FakeBot
  let chat: FakeChat

  beforeAll(async () => {
    tg = await startFakeMessenger()
    t = await taskServer('podman', { berth: { messenger: { apiBaseUrl: tg.url } } })
    bot = tg.createBot({ username: 'approvals_bot' })
    chat = tg.chat()
    await t.api.integrations.messenger.setup({ body: { bot_token: bot.token } })
    const { code } = await t.api.integrations.messenger.claim()
    expect((await tg.sendUpdate(bot.token, { chat, text: code })).status).toBe(200)
  })
  afterAll(async () => {
    await t.s.close()
    await tg.close()
    expect(await sweep(t.runtime, t.pool)).toBe(0)
  })

  /** The bot's post about the next request of `taskId` (after `mark` messages). */
  const asked = (taskId: string, mark: number) =>
    vi.waitFor(() => {
      const m = tg.sent.slice(mark).find((x) => x.chat_id === chat.id && x.text.startsWith(`Task ${taskId} asks`))
      if (!m) throw new Error('no request posted yet')
      return m
    }, 60_000)

  it('a request is posted with its tool and input; a reply denies it with a reason, another allows the next', async () => {
    const mark = tg.sent.length
    const { task_id } = await t.submit({
      prompt:
        'Touch it. [[berth:tool Bash {"command":"touch /workspace/chat-marker"}]] [[berth:tool Bash {"command":"touch /workspace/chat-marker"}]] [[berth:text Done.]]',
      require_approval: ['Bash'],
    })
    const first = await asked(task_id, mark)
    expect(first.text).toContain('Bash')
    expect(first.text).toContain('touch /workspace/chat-marker')
    // Neither allow nor deny: nothing is decided, and the chat is told how to answer.
    const unclear = await tg.sendUpdate(bot.token, { chat, text: 'hmm', replyTo: first.message_id })
    await vi.waitFor(() => {
      const m = tg.sent.find((x) => x.reply_to_message_id === unclear.update.message.message_id)
      expect(m?.text).toMatch(/^Not decided/)
    })
    expect((await t.api.tasks.approvals.list({ params: { id: task_id } })).approvals).toHaveLength(1)
    const mark2 = tg.sent.length
    await tg.sendUpdate(bot.token, { chat, text: 'deny: not from the chat', replyTo: first.message_id })
    const second = await asked(task_id, mark2)
    // A second answer to the first request is refused: it was decided.
    const late = await tg.sendUpdate(bot.token, { chat, text: 'allow', replyTo: first.message_id })
    await vi.waitFor(() => {
      const m = tg.sent.find((x) => x.reply_to_message_id === late.update.message.message_id)
      expect(m?.text).toMatch(/^Could not decide/)
    })
    await tg.sendUpdate(bot.token, { chat, text: 'yes', replyTo: second.message_id })
    const task = await t.waitDone(task_id)
    expect(task.status).toBe('completed')
    const events = await t.events(task_id)
    expect(events.filter((e) => e.type === 'permission_decision')).toEqual([
      expect.objectContaining({ decision: 'deny', message: 'not from the chat', by: 'caller' }),
      expect.objectContaining({ decision: 'allow', by: 'caller' }),
    ])
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({
      is_error: true,
      output: expect.stringContaining('not from the chat'),
    })
  })
})
