/**
 * Webhook deliveries after the audit: hosts resolve at delivery (not only when saved), every
 * address is checked and the connection goes to the one checked, retries survive a restart,
 * and Standard Webhooks headers verify with the off-the-shelf library. DNS is a table here
 * (no query leaves the machine); receivers listen on 127.0.0.1.
 */
import type { LookupAddress } from 'node:dns'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { Webhook } from 'standardwebhooks'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { systemClock } from '@berth/core'
import type { BerthClient } from '@berth/client'
import { clientFor, failure, startServer } from './helpers.js'
import { startReceiver, verifySignature } from './receivers.js'

/** A resolver answering from `table` (a function per host may change its answer: rebinding). */
function tableResolver(table: Record<string, string[] | (() => string[])>) {
  const calls: string[] = []
  const resolve = async (host: string): Promise<LookupAddress[]> => {
    calls.push(host)
    const entry = table[host]
    const addresses = typeof entry === 'function' ? entry() : entry
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' })
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
  }
  return { resolve, calls }
}

const closers: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c()
})

/** A server and the typed client of a user of it. */
async function server(opts: Parameters<typeof startServer>[0]): Promise<BerthClient> {
  const s = await startServer(opts)
  closers.push(() => s.close())
  return clientFor(s, (await s.user()).token)
}
const webhook = (api: BerthClient, config: { url: string; secret?: string }) =>
  api.integrations.create({ body: { type: 'webhook', config } })

describe('webhook addresses', () => {
  it('accepts a host that does not resolve yet, and refuses one resolving to a private address when saved', async () => {
    const dns = tableResolver({ 'internal.example': ['10.1.2.3'] })
    const api = await server({ notifications: { resolve: dns.resolve } })
    expect(await webhook(api, { url: 'https://not-yet.example/hook' })).toMatchObject({ type: 'webhook' })
    const internal = await failure(webhook(api, { url: 'https://internal.example/hook' }))
    expect(internal.status).toBe(400)
    expect((internal.details!.issues as unknown[])[0]).toMatchObject({
      path: 'config.url',
      message: expect.stringContaining('10.1.2.3'),
    })
  })

  it('resolves again at every delivery and refuses when any address is private (DNS rebinding)', async () => {
    const receiver = await startReceiver()
    closers.push(receiver.close)
    let answer = ['203.0.113.7']
    const dns = tableResolver({ 'rebind.example': () => answer })
    const api = await server({ notifications: { resolve: dns.resolve, attempts: 1 } })
    const created = await webhook(api, { url: `http://rebind.example:${receiver.port}/hook` })
    // Public when saved; now the name also answers with loopback, where the receiver is.
    answer = ['203.0.113.7', '127.0.0.1']
    dns.calls.length = 0
    const test = await failure(api.integrations.test({ params: { id: created.id } }))
    expect(test.status).toBe(502)
    expect(test.details).toMatchObject({ delivery: { error: expect.stringContaining('127.0.0.1') } })
    expect(dns.calls).toEqual(['rebind.example'])
    expect(receiver.received).toHaveLength(0)
  })

  it('connects to the address it resolved itself, not to a second resolution', async () => {
    const receiver = await startReceiver()
    closers.push(receiver.close)
    // Only Berth's resolver knows this name: the request can only arrive through it.
    const dns = tableResolver({ 'pinned.example': ['127.0.0.1'] })
    const api = await server({ allowPrivateWebhooks: true, notifications: { resolve: dns.resolve } })
    const created = await webhook(api, { url: `http://pinned.example:${receiver.port}/hook` })
    await api.integrations.test({ params: { id: created.id } })
    expect(receiver.received).toHaveLength(1)
    expect(receiver.received[0]!.headers.host).toBe(`pinned.example:${receiver.port}`)
  })
})

describe('webhook signatures', () => {
  it('sends Standard Webhooks headers that the standardwebhooks library verifies, and X-Berth-Signature', async () => {
    const receiver = await startReceiver()
    closers.push(receiver.close)
    // The library checks the timestamp against the real time.
    const api = await server({ allowPrivateWebhooks: true, clock: systemClock })
    const secret = 'whsec-test-secret-4242'
    const created = await webhook(api, { url: receiver.url, secret })
    await api.integrations.test({ params: { id: created.id } })
    const r = receiver.received[0]!
    expect(r.headers['webhook-id']).toBe(r.headers['x-berth-delivery'])
    expect(r.headers['webhook-timestamp']).toBe(r.headers['x-berth-timestamp'])
    const wh = new Webhook(`whsec_${Buffer.from(secret).toString('base64')}`)
    expect(wh.verify(r.body, r.headers as Record<string, string>)).toMatchObject({ event: 'integration.test' })
    expect(() =>
      new Webhook(`whsec_${Buffer.from('another').toString('base64')}`).verify(
        r.body,
        r.headers as Record<string, string>,
      ),
    ).toThrow()
    expect(verifySignature(secret, r)).toBe(true)
  })
})

describe('webhook retries', () => {
  it('a retry waiting when the server stops is made by the next start, with the same webhook-id', async () => {
    const receiver = await startReceiver((_, i) => (i === 0 ? 503 : 200))
    closers.push(receiver.close)
    // A store that outlives the first server (a memory one is cleared when it closes).
    const dir = mkdtempSync(join(tmpdir(), 'berth-retries-'))
    closers.push(async () => rmSync(dir, { recursive: true, force: true }))
    const storage = () => createStorage({ driver: fsDriver({ base: dir }) })
    const encryptionKey = randomBytes(32).toString('base64')
    const opts = { encryptionKey, allowPrivateWebhooks: true, notifications: { backoffMs: 1500, attempts: 3 } }
    const first = await startServer({ ...opts, storage: storage() })
    const { token, id: owner } = await first.user()
    const api = clientFor(first, token)
    const key = await api.apiKeys.create({ body: { name: 'k', provider: 'stub' } })
    const profile = await api.profiles.create({ body: { name: 'P', slug: 'p', api_key_id: key.id } })
    const integration = await webhook(api, { url: receiver.url })
    await first.berth.services.notifications.notify(owner, profile.id, 'task.completed', {})
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), 15_000)
    await first.close()

    const second = await startServer({ ...opts, storage: storage() })
    closers.push(() => second.close())
    await second.berth.ready
    await vi.waitFor(() => expect(receiver.received).toHaveLength(2), 10_000)
    expect(receiver.received[1]!.headers['webhook-id']).toBe(receiver.received[0]!.headers['webhook-id'])
    const { deliveries } = await clientFor(second, token).integrations.deliveries({ params: { id: integration.id } })
    expect(deliveries.map((d) => [d.attempt, d.status])).toEqual([
      [2, 'succeeded'],
      [1, 'failed'],
    ])
  })
})
