/**
 * Integrations: webhook and email, secret config fields masked in every response and
 * encrypted at rest, private webhook destinations refused, and the test endpoint against
 * real receivers (an HTTP server and an SMTP server on 127.0.0.1).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SECRET_MASK, type OutgoingNotification } from '@berth/core'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { webhookChannel } from '../src/notifiers/webhook.js'
import type { BerthClient, BerthError } from '@berth/client'
import { clientFor, failure, startServer, type TestServer } from './helpers.js'
import { startReceiver, startSmtp, verifySignature } from './receivers.js'

/** The paths the issues of a refusal name. */
const issuePaths = (err: BerthError) => ((err.details?.issues ?? []) as { path: string }[]).map((i) => i.path)

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f)
    return statSync(p).isDirectory() ? files(p) : [p]
  })
}

describe('integrations', () => {
  const FIRST_SECRET = 'whsec-FIRST-marker-7f3a9c'
  const SECOND_SECRET = 'whsec-SECOND-marker-18bd2e'
  let s: TestServer
  let dataDir: string
  let receiver: Awaited<ReturnType<typeof startReceiver>>
  const seen: string[] = []
  let api: BerthClient
  let token: string
  let profileId: string

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'berth-integrations-'))
    // Real files, so "encrypted at rest" is checked on disk; private receivers allowed.
    s = await startServer({
      dataDir,
      storage: createStorage({ driver: fsDriver({ base: join(dataDir, 'store') }) }),
      allowPrivateWebhooks: true,
    })
    receiver = await startReceiver()
    token = (await s.user()).token
    api = clientFor(s, token, seen)
    const key = await api.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    profileId = (await api.profiles.create({ body: { name: 'P', slug: 'p', api_key_id: key.id } })).id
  })
  afterAll(async () => {
    await s.close()
    await receiver.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('creates webhook and email integrations; the types with their own connect flows are refused', async () => {
    const hook = await api.integrations.create({ body: { type: 'webhook', config: { url: receiver.url } } })
    expect(hook).toMatchObject({
      type: 'webhook',
      config: { url: receiver.url },
      enabled: true,
      is_default: false,
      scope: 'all',
      profile_ids: [],
    })
    expect(hook.id).toMatch(/^int_/)
    const mail = await api.integrations.create({
      body: { type: 'email', config: { recipients: ['ops@example.test'] }, enabled: false },
    })
    expect(mail).toMatchObject({ type: 'email', enabled: false })

    // Raw: bodies the client's types refuse (other types, configs of the wrong shape).
    const post = async (json: unknown) => {
      const res = await s.request('/v1/integrations', { method: 'POST', token, json })
      return {
        status: res.status,
        body: (await res.json()) as { details: { issues: { location: string; path: string }[] } },
      }
    }
    for (const type of ['chatprovider', 'mailprovider', 'messenger', 'bankprovider']) {
      const res = await post({ type, config: { bot_token: 'x' } })
      expect(res.status).toBe(400)
      expect(res.body.details.issues).toEqual([expect.objectContaining({ location: 'body', path: 'type' })])
    }
    const cases: [Record<string, unknown>, string][] = [
      [{ url: 'ftp://example.test/x' }, 'config.url'],
      [{ url: 'not a url' }, 'config.url'],
      [{ url: 'https://user:pw@example.test/' }, 'config.url'],
      [{ url: receiver.url, secret: 42 }, 'config.secret'],
      [{ url: receiver.url, extra: 1 }, 'config.extra'],
      [{}, 'config.url'],
    ]
    for (const [config, path] of cases) {
      const res = await post({ type: 'webhook', config })
      expect(res.status, JSON.stringify(config)).toBe(400)
      expect(res.body.details.issues.map((i) => i.path)).toContain(path)
    }
    const badMail = await failure(
      api.integrations.create({ body: { type: 'email', config: { recipients: ['not-an-address'] } } }),
    )
    expect(issuePaths(badMail)[0]).toBe('config.recipients.0')

    const list = await api.integrations.list({ query: { type: 'email' } })
    expect(list).toMatchObject({ integrations: [{ id: mail.id }] })
    await api.integrations.delete({ params: { id: hook.id } })
    expect((await failure(api.integrations.delete({ params: { id: hook.id } }))).status).toBe(404)
    await api.integrations.delete({ params: { id: mail.id } })
  })

  it('masks secret config fields in every response, keeps them on a masked PATCH, replaces them on a new value and encrypts them at rest', async () => {
    const created = await api.integrations.create({
      body: { type: 'webhook', config: { url: receiver.url, secret: FIRST_SECRET } },
    })
    expect(created.config).toEqual({ url: receiver.url, secret: SECRET_MASK })
    const id = created.id

    // A caller sends the config back as read, mask included: the stored secret is kept.
    const masked = await api.integrations.update({ params: { id }, body: { config: created.config, enabled: true } })
    expect(masked.config).toEqual({ url: receiver.url, secret: SECRET_MASK })
    await api.integrations.test({ params: { id } })
    expect(verifySignature(FIRST_SECRET, receiver.received.at(-1)!)).toBe(true)

    const replaced = await api.integrations.update({
      params: { id },
      body: { config: { url: receiver.url, secret: SECOND_SECRET } },
    })
    expect(replaced.config).toMatchObject({ secret: SECRET_MASK })
    await api.integrations.test({ params: { id } })
    expect(verifySignature(SECOND_SECRET, receiver.received.at(-1)!)).toBe(true)
    expect(verifySignature(FIRST_SECRET, receiver.received.at(-1)!)).toBe(false)

    // A config without the secret removes it: deliveries go unsigned.
    await api.integrations.update({ params: { id }, body: { config: { url: receiver.url } } })
    await api.integrations.test({ params: { id } })
    expect(receiver.received.at(-1)!.headers['x-berth-signature']).toBeUndefined()
    await api.integrations.update({ params: { id }, body: { config: { url: receiver.url, secret: SECOND_SECRET } } })

    // The mask where nothing is stored cannot keep anything.
    const nothing = await failure(
      api.integrations.create({ body: { type: 'webhook', config: { url: receiver.url, secret: SECRET_MASK } } }),
    )
    expect(nothing.status).toBe(400)
    expect(issuePaths(nothing)[0]).toBe('config.secret')

    await api.integrations.list()
    await api.integrations.get({ params: { id } })
    await api.integrations.deliveries({ params: { id }, query: { limit: 100 } })
    await api.integrations.list({ query: { type: 'webhook' } })
    expect(seen.length).toBeGreaterThan(10)
    for (const text of seen) {
      expect(text).not.toContain(FIRST_SECRET)
      expect(text).not.toContain(SECOND_SECRET)
    }
    for (const file of files(join(dataDir, 'store'))) {
      const content = readFileSync(file, 'utf8')
      expect(content, file).not.toContain(FIRST_SECRET)
      expect(content, file).not.toContain(SECOND_SECRET)
    }
    expect(s.logs.join('\n')).not.toContain(SECOND_SECRET)
  })

  it("refuses another caller's profile ids naming the field; keeps one default per type", async () => {
    const other = await s.user('Other')
    const otherApi = clientFor(s, other.token)
    const otherKey = await otherApi.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    const foreign = (await otherApi.profiles.create({ body: { name: 'O', slug: 'o', api_key_id: otherKey.id } })).id

    const refused = await failure(
      api.integrations.create({
        body: { type: 'email', config: { recipients: ['a@example.test'] }, profile_ids: [profileId, foreign] },
      }),
    )
    expect(refused.status).toBe(400)
    expect(refused.details?.issues).toEqual([expect.objectContaining({ location: 'body', path: 'profile_ids.1' })])

    const scoped = await api.integrations.create({
      body: { type: 'email', config: { recipients: ['a@example.test'] }, profile_ids: [profileId], is_default: true },
    })
    expect(scoped).toMatchObject({ scope: 'selected', profile_ids: [profileId], is_default: true })
    const patched = await failure(
      api.integrations.update({ params: { id: scoped.id }, body: { profile_ids: [foreign] } }),
    )
    expect(patched.status).toBe(400)
    expect(issuePaths(patched)[0]).toBe('profile_ids.0')
    expect(
      (await failure(otherApi.integrations.update({ params: { id: scoped.id }, body: { enabled: false } }))).status,
    ).toBe(404)

    const second = await api.integrations.create({
      body: { type: 'email', config: { recipients: ['b@example.test'] }, is_default: true },
    })
    expect((await api.integrations.get({ params: { id: scoped.id } })).is_default).toBe(false)
    expect(second.is_default).toBe(true)
    await api.integrations.delete({ params: { id: scoped.id } })
    await api.integrations.delete({ params: { id: second.id } })
  })

  it('the test endpoint sends one signed notification now; a failing receiver is 502 BAD_GATEWAY with the delivery', async () => {
    let answer: number | 'hang' = 200
    const picky = await startReceiver(() => answer)
    try {
      const hook = await api.integrations.create({
        body: { type: 'webhook', config: { url: picky.url, secret: FIRST_SECRET } },
      })
      const ok = await api.integrations.test({ params: { id: hook.id } })
      expect(ok).toMatchObject({
        integration_id: hook.id,
        event: 'integration.test',
        attempt: 1,
        status: 'succeeded',
        response_status: 200,
        error: null,
        will_retry: false,
      })
      expect(picky.received).toHaveLength(1)
      const r = picky.received[0]!
      expect(verifySignature(FIRST_SECRET, r)).toBe(true)
      expect(r.headers).toMatchObject({
        'content-type': 'application/json; charset=utf-8',
        'x-berth-event': 'integration.test',
        'x-berth-delivery': ok.notification_id,
      })
      expect(r.headers['x-berth-timestamp']).toBe(String(Math.floor(s.clock.now() / 1000)))
      expect(JSON.parse(r.body)).toEqual({ event: 'integration.test', at: new Date(s.clock.now()).toISOString() })

      for (const [status, code] of [
        [500, 500],
        [404, 404],
        [302, 302],
      ] as const) {
        answer = status
        const failed = await failure(api.integrations.test({ params: { id: hook.id } }))
        expect(failed.status).toBe(502)
        expect(failed).toMatchObject({
          code: 'BAD_GATEWAY',
          details: { delivery: { status: 'failed', response_status: code, will_retry: false } },
        })
      }
      // One attempt each: the test endpoint does not retry.
      expect(picky.received).toHaveLength(4)
      await picky.close()
      const down = await failure(api.integrations.test({ params: { id: hook.id } }))
      expect(down.status).toBe(502)
      expect(down.details?.delivery).toMatchObject({
        response_status: null,
        error: expect.stringContaining('ECONNREFUSED'),
      })

      const deliveries = await api.integrations.deliveries({ params: { id: hook.id }, query: { limit: 3 } })
      expect(deliveries.total).toBe(5)
      expect(deliveries.deliveries.map((d) => d.response_status)).toEqual([null, 302, 404])
    } finally {
      await picky.close()
    }
  })

  it("cannot read another caller's deliveries", async () => {
    const hook = await api.integrations.create({ body: { type: 'webhook', config: { url: receiver.url } } })
    await api.integrations.test({ params: { id: hook.id } })
    const other = clientFor(s, (await s.user('Eve')).token)
    expect((await failure(other.integrations.deliveries({ params: { id: hook.id } }))).status).toBe(404)
    expect((await failure(other.integrations.test({ params: { id: hook.id } }))).status).toBe(404)
  })
})

describe('private webhook destinations', () => {
  let s: TestServer
  let receiver: Awaited<ReturnType<typeof startReceiver>>
  beforeAll(async () => {
    s = await startServer()
    receiver = await startReceiver()
  })
  afterAll(async () => {
    await s.close()
    await receiver.close()
  })

  it('are refused on create and update, naming config.url, unless the deployment allows them', async () => {
    const api = clientFor(s, (await s.user()).token)
    const port = receiver.port
    for (const url of [
      receiver.url,
      `http://localhost:${port}/`,
      `http://[::1]:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://2130706433:${port}/`,
      'http://0x7f.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.8/',
      'http://192.168.1.1/',
      'http://[fd00::1]/',
      'http://0.0.0.0/',
    ]) {
      const res = await failure(api.integrations.create({ body: { type: 'webhook', config: { url } } }))
      expect(res.status, url).toBe(400)
      expect(res.details?.issues).toEqual([
        expect.objectContaining({ path: 'config.url', message: expect.stringMatching(/private|does not resolve/) }),
      ])
    }
    // A public address is fine (a literal one: no DNS here); moving it somewhere private is not.
    const hook = await api.integrations.create({
      body: { type: 'webhook', config: { url: 'https://203.0.113.7/hook' } },
    })
    const moved = await failure(
      api.integrations.update({ params: { id: hook.id }, body: { config: { url: `http://127.0.0.1:${port}/` } } }),
    )
    expect(moved.status).toBe(400)
    expect(issuePaths(moved)[0]).toBe('config.url')
    expect(receiver.received).toHaveLength(0)
  })

  it('are refused again at delivery time, against the addresses the connection would use', async () => {
    const strict = webhookChannel({ allowPrivate: false })
    const n: OutgoingNotification = {
      notification_id: 'ntf_x',
      event: 'integration.test',
      payload: {},
      body: '{}',
      timestamp: 0,
      attempt: 1,
    }
    for (const url of [receiver.url, `http://localhost:${receiver.port}/hook`]) {
      const outcome = await strict.deliver({ url }, n)
      expect(outcome, url).toMatchObject({
        ok: false,
        status: null,
        retryable: false,
        error: expect.stringContaining('private'),
      })
    }
    expect(receiver.received).toHaveLength(0)
    // The same channel allowed to reach private addresses delivers.
    expect(await webhookChannel({ allowPrivate: true }).deliver({ url: receiver.url }, n)).toEqual({
      ok: true,
      status: 200,
    })
    expect(receiver.received).toHaveLength(1)
  })
})

describe('email integrations', () => {
  let smtp: Awaited<ReturnType<typeof startSmtp>>
  let s: TestServer
  beforeAll(async () => {
    smtp = await startSmtp()
    s = await startServer({
      smtp: {
        host: '127.0.0.1',
        port: smtp.port,
        from: 'Berth <berth@example.test>',
        auth: smtp.auth,
        ignoreTLS: true,
      },
    })
  })
  afterAll(async () => {
    await s.close()
    await smtp.close()
  })

  it("send the test notification through the deployment's SMTP server", async () => {
    const api = clientFor(s, (await s.user()).token)
    const mail = await api.integrations.create({
      body: { type: 'email', config: { recipients: ['ops@example.test', 'dev@example.test'] } },
    })
    const res = await api.integrations.test({ params: { id: mail.id } })
    expect(res).toMatchObject({ status: 'succeeded', response_status: 250 })
    expect(smtp.logins).toEqual(['berth'])
    expect(smtp.mails).toHaveLength(1)
    const m = smtp.mails[0]!
    expect(m.from?.value).toEqual([{ name: 'Berth', address: 'berth@example.test' }])
    expect((Array.isArray(m.to) ? m.to : [m.to]).flatMap((t) => t!.value.map((v) => v.address))).toEqual([
      'ops@example.test',
      'dev@example.test',
    ])
    expect(m.subject).toBe('Berth: test notification')
    expect(m.headers.get('x-berth-event')).toBe('integration.test')
    expect(m.headers.get('x-berth-delivery')).toBe(res.notification_id)
    expect(m.text).toContain('the integration works')
  })

  it('a refusing SMTP server is 502 with its reply code; no SMTP configured is 502 saying so', async () => {
    const refusing = await startSmtp({ reject: 550 })
    const strict = await startServer({
      smtp: {
        host: '127.0.0.1',
        port: refusing.port,
        from: 'berth@example.test',
        auth: refusing.auth,
        ignoreTLS: true,
      },
    })
    const none = await startServer()
    try {
      for (const [server, check] of [
        [strict, { response_status: 550, error: expect.stringContaining('550') }],
        [none, { response_status: null, error: expect.stringContaining('no SMTP server') }],
      ] as const) {
        const api = clientFor(server, (await server.user()).token)
        const mail = await api.integrations.create({
          body: { type: 'email', config: { recipients: ['gone@example.test'] } },
        })
        const res = await failure(api.integrations.test({ params: { id: mail.id } }))
        expect(res.status).toBe(502)
        expect(res).toMatchObject({ code: 'BAD_GATEWAY', details: { delivery: { status: 'failed', ...check } } })
      }
      expect(refusing.mails).toHaveLength(0)
    } finally {
      await strict.close()
      await none.close()
      await refusing.close()
    }
  })
})
