/**
 * `berthMiddleware`: Berth's paths go to Berth, everything else to the host app's next
 * handler, in Express 5 and in Fastify 5 (through an `onRequest` hook), over real servers.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import express from 'express'
import Fastify from 'fastify'
import { createStorage } from 'unstorage'
import { silentLogger } from '@berth/core'
import { berthMiddleware, createBerth } from '@berth/server'
import { afterAll, describe, expect, it } from 'vitest'

const dataDir = mkdtempSync(join(tmpdir(), 'berth-mw-'))
const berth = createBerth({
  storage: createStorage(),
  runtime: false,
  dataDir,
  logger: silentLogger,
  authenticate: (req) => (req.headers.get('x-user') ? { id: `usr_${req.headers.get('x-user')}`, role: 'user' } : null),
})
const closers: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const c of closers) await c()
  await berth.close()
  rmSync(dataDir, { recursive: true, force: true })
})

/** The same checks against either host: Berth's routes, its 404s, and the app's own routes. */
async function checkHost(url: string) {
  expect(await (await fetch(`${url}/app/hello`)).json()).toEqual({ from: 'app' })
  // A body the app parses itself (its parser runs after Berth let the request pass).
  expect(
    await (
      await fetch(`${url}/app/echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"n":1}',
      })
    ).json(),
  ).toEqual({ n: 1 })
  expect(((await (await fetch(`${url}/health`)).json()) as { ok: boolean }).ok).toBe(true)
  const headers = { 'x-user': 'mw1', 'content-type': 'application/json' }
  const key = await fetch(`${url}/v1/api-keys`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'k', provider: 'stub' }),
  })
  expect(key.status).toBe(201)
  const bad = await fetch(`${url}/v1/profiles`, { method: 'POST', headers, body: '{oops' })
  expect(bad.status).toBe(400)
  expect(((await bad.json()) as { code: string }).code).toBe('VALIDATION_FAILED')
  // Unknown paths under /v1 are Berth's JSON 404; other unknown paths are the app's.
  const unknown = await fetch(`${url}/v1/nothing-here?x=1`, { headers })
  expect(unknown.status).toBe(404)
  expect(((await unknown.json()) as { code: string }).code).toBe('NOT_FOUND')
  expect(await (await fetch(`${url}/elsewhere`)).text()).toBe('app 404')
}

describe('berthMiddleware', () => {
  it('owns Berth’s paths only', () => {
    const mw = berthMiddleware(berth)
    for (const p of [
      '/v1/profiles',
      '/v1/anything',
      '/admin/users',
      '/health',
      '/openapi.json',
      '/docs',
      '/api/playbooks/pb_1/webhook/s3cret?x=1',
    ])
      expect(mw.owns(p), p).toBe(true)
    for (const p of ['/', '/app', '/v10', '/healthz', '/api/other']) expect(mw.owns(p), p).toBe(false)
  })

  it('in Express 5: Berth’s requests to Berth, the rest to next()', async () => {
    const app = express()
    app.use(berthMiddleware(berth))
    app.use(express.json())
    app.get('/app/hello', (_req, res) => void res.json({ from: 'app' }))
    app.post('/app/echo', (req, res) => void res.json(req.body))
    app.use((_req, res) => void res.status(404).type('text').send('app 404'))
    const server: Server = createServer(app)
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    closers.push(() => new Promise((r) => server.close(() => r())))
    await checkHost(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  })

  it('in Fastify 5, through an onRequest hook', async () => {
    const app = Fastify()
    const mw = berthMiddleware(berth)
    app.addHook('onRequest', (req, reply, done) => {
      if (!mw.owns(req.url)) return done()
      reply.hijack()
      mw(req.raw, reply.raw, done)
    })
    app.get('/app/hello', async () => ({ from: 'app' }))
    app.post('/app/echo', async (req) => req.body)
    app.setNotFoundHandler((_req, reply) => void reply.code(404).type('text/plain').send('app 404'))
    const url = await app.listen({ port: 0, host: '127.0.0.1' })
    closers.push(() => app.close())
    await checkHost(url)
  })
})
