import Fastify from 'fastify'
import { createStorage } from 'unstorage'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { silentLogger } from '@berth/core'
import { createBerth } from '@berth/server'
import { afterAll, beforeAll, expect, it } from 'vitest'

const app = Fastify()
let url: string
const dataDir = mkdtempSync(join(tmpdir(), 'berth-fastify-'))
const berth = createBerth({
  storage: createStorage(),
  runtime: false,
  dataDir,
  logger: silentLogger,
  authenticate: (req) => (req.headers.get('x-user') ? { id: `usr_${req.headers.get('x-user')}`, role: 'user' } : null),
})

beforeAll(async () => {
  app.get('/app/hello', async () => ({ from: 'fastify' }))
  // Hand Berth's paths to its Node handler untouched: Fastify must not parse the bodies.
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers()
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null))
    for (const prefix of ['/v1/*', '/health', '/openapi.json', '/docs', '/docs/*', '/admin/*']) {
      scope.all(prefix, (req, reply) => {
        reply.hijack()
        berth.handler(req.raw, reply.raw)
      })
    }
  })
  url = await app.listen({ port: 0, host: '127.0.0.1' })
})
afterAll(async () => {
  await app.close()
  await berth.close()
  rmSync(dataDir, { recursive: true, force: true })
})

it('serves Berth and the host app side by side in Fastify 5', async () => {
  expect(await (await fetch(`${url}/app/hello`)).json()).toEqual({ from: 'fastify' })
  expect((await (await fetch(`${url}/health`)).json()).ok).toBe(true)
  const headers = { 'x-user': 'fastify1', 'content-type': 'application/json' }
  const key = await fetch(`${url}/v1/api-keys`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'k', provider: 'stub' }),
  })
  expect(key.status).toBe(201)
  const { id } = (await key.json()) as { id: string }
  const profile = await fetch(`${url}/v1/profiles`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ name: 'P', slug: 'p', api_key_id: id }),
  })
  expect(profile.status).toBe(201)
  const bad = await fetch(`${url}/v1/profiles`, { method: 'POST', headers, body: '{oops' })
  expect(bad.status).toBe(400)
  expect(((await bad.json()) as { code: string }).code).toBe('VALIDATION_FAILED')
  expect((await fetch(`${url}/v1/profiles`)).status).toBe(401)
})
