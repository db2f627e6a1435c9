/**
 * examples/embed-express: Berth inside an Express 5 app, authenticated by the app's own
 * sessions, called through @berth/client at the root and under the `/berth` prefix.
 */
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BerthError, createBerthClient } from '@berth/client'
import { createApp } from '../../../examples/embed-express/src/app.js'

let server: Server
let url: string
let close: () => Promise<void>

async function signIn(id: string, name: string): Promise<string> {
  const res = await fetch(`${url}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ id, name }),
  })
  expect(res.status).toBe(200)
  return ((await res.json()) as { session: string }).session
}

beforeAll(async () => {
  // fs storage (the default) in a fresh temporary directory.
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-embed-'))
  const { app, berth } = createApp({
    dataDir,
    runtime: false,
    logger: { info() {}, warn() {}, error() {} },
  })
  server = app.listen(0, '127.0.0.1')
  await new Promise<void>((r) => server.once('listening', () => r()))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  close = async () => {
    server.closeAllConnections()
    await new Promise((r) => server.close(r))
    await berth.close()
    rmSync(dataDir, { recursive: true, force: true })
  }
})
afterAll(() => close())

describe('Berth embedded in Express', () => {
  it("keeps the host app's own routes working beside Berth's", async () => {
    const home = await fetch(`${url}/`)
    expect(home.status).toBe(200)
    expect(await home.text()).toMatch(/Host app/)
    const session = await signIn('ada', 'Ada')
    const me = await fetch(`${url}/me`, { headers: { authorization: `Bearer ${session}` } })
    expect(await me.json()).toMatchObject({ id: 'ada', name: 'Ada' })
    // A path that is neither the app's nor Berth's is left to Express.
    const unknown = await fetch(`${url}/not-a-route`)
    expect(unknown.status).toBe(404)
    expect(unknown.headers.get('content-type')).not.toMatch(/json/)
  })

  it("authenticates Berth calls with the app's sessions, at the root", async () => {
    const session = await signIn('ada', 'Ada')
    const berth = createBerthClient({ baseURL: url, token: session })
    expect((await berth.health()).ok).toBe(true)
    const key = await berth.apiKeys.create({ body: { name: 'Offline', provider: 'stub' } })
    const profile = await berth.profiles.create({ body: { name: 'Helper', slug: 'helper', api_key_id: key.id } })
    expect((await berth.profiles.get({ params: { id: profile.id } })).slug).toBe('helper')

    const anonymous = createBerthClient({ baseURL: url })
    await expect(anonymous.profiles.list()).rejects.toMatchObject({ status: 401, code: 'UNAUTHORIZED' })
    // Unknown paths in Berth's namespace get Berth's JSON 404.
    const err = await createBerthClient({ baseURL: `${url}/v1/nope` })
      .health()
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(BerthError)
    expect(err).toMatchObject({ status: 404, code: 'NOT_FOUND' })
  })

  it('serves the same Berth under the /berth prefix, owner isolation included', async () => {
    const adaSession = await signIn('ada', 'Ada')
    // Made at the root, read under the prefix: one Berth behind both (this test's own profile).
    const atRoot = createBerthClient({ baseURL: url, token: adaSession })
    const adaKey = await atRoot.apiKeys.create({ body: { name: 'Prefix test', provider: 'stub' } })
    const made = await atRoot.profiles.create({ body: { name: 'Prefixed', slug: 'prefixed', api_key_id: adaKey.id } })
    const ada = createBerthClient({ baseURL: `${url}/berth`, token: adaSession })
    const bob = createBerthClient({ baseURL: `${url}/berth`, token: await signIn('bob', 'Bob') })
    const { profiles } = await ada.profiles.list()
    expect(profiles.find((p) => p.id === made.id)?.slug).toBe('prefixed')
    expect((await bob.profiles.list()).total).toBe(0)
    await expect(bob.profiles.get({ params: { id: made.id } })).rejects.toMatchObject({
      status: 404,
      code: 'NOT_FOUND',
    })
    // Bodies reach Berth intact through Express (no body parser in front of it).
    const key = await bob.apiKeys.create({ body: { name: 'Bob offline', provider: 'stub' } })
    expect(key.name).toBe('Bob offline')
  })
})
