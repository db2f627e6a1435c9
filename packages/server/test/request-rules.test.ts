/**
 * What the server refuses before any operation runs, and the document declares: paths a URL
 * parser would resolve (dot segments, encoded ones too, `//`, `\`) are 400 before routing,
 * paths no operation has are 404; a body not sent as the operation's media type is 415; a
 * body sent to an operation that takes none is 400, answered without reading it. Each
 * refusal changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, startServer, type Json, type TestServer } from './helpers.js'
import { rawRequest, type RawAnswer } from './raw-http.helpers.js'

let s: TestServer
let token: string
let doc: Json
let profileId: string
let keyId: string

beforeAll(async () => {
  s = await startServer()
  token = (await s.user('Rules')).token
  doc = (await (await s.request('/openapi.json')).json()) as Json
  const key = (await (
    await s.request('/v1/api-keys', { method: 'POST', token, json: { name: 'k', provider: 'stub' } })
  ).json()) as Json
  keyId = key.id
  const profile = await s.request('/v1/profiles', {
    method: 'POST',
    token,
    json: { name: 'P', slug: 'p', api_key_id: key.id },
  })
  profileId = ((await profile.json()) as Json).id
})
afterAll(() => s.close())

const auth = (t = token) => ({ authorization: `Bearer ${t}` })
const send = (o: Parameters<typeof rawRequest>[1]) => rawRequest(s.url, o)
const codeOf = (res: RawAnswer) => (JSON.parse(res.body) as Json).code as string
const declared = (path: string, method: string) => Object.keys(doc.paths[path][method].responses)

describe('paths are routed as written', () => {
  it('a dot segment, encoded or not, an empty segment or a backslash is 400 before routing, never resolved', async () => {
    for (const path of [
      '/v1/tasks/../../admin/users',
      '/v1/tasks/%2e%2e/%2e%2e/admin/users',
      '/v1/tasks/.%2E/%2e./admin/users',
      '/v1/./tasks',
      '/v1/tasks/.',
      '//v1/tasks',
      '/v1//tasks',
      '/v1\\tasks',
      '/v1/tasks\\..\\..\\admin\\users',
      'http://berth.test/v1/tasks/../../admin/users',
    ]) {
      // Neither a caller (403 once resolved to the admin route) nor the operator (200) gets through.
      for (const t of [token, ADMIN_TOKEN]) {
        const res = await send({ method: 'GET', path, headers: auth(t) })
        expect([res.status, codeOf(res)], path).toEqual([400, 'VALIDATION_FAILED'])
        expect(JSON.parse(res.body).details.issues[0], path).toMatchObject({ location: 'path' })
      }
    }
    // A /v1 refusal counts against the rate limit and says so, as a 404 does.
    const refused = await send({ method: 'GET', path: '/v1/./tasks', headers: auth() })
    expect(refused.headers['ratelimit-remaining']).toBeDefined()
    // A refused write writes nothing.
    const del = await send({ method: 'DELETE', path: `/v1/tasks/../profiles/${profileId}`, headers: auth() })
    expect(del.status).toBe(400)
    expect((await s.request(`/v1/profiles/${profileId}`, { token })).status).toBe(200)
  })

  it('plain paths still work: a trailing slash, dots inside a segment or in the query', async () => {
    for (const path of ['/v1/tasks', '/v1/tasks/', '/v1/tasks?status=queued&x=/../..']) {
      expect((await send({ method: 'GET', path, headers: auth() })).status, path).toBe(200)
    }
    const dotted = await send({ method: 'GET', path: '/v1/profiles/prof_.x..', headers: auth() })
    expect([dotted.status, codeOf(dotted)]).toEqual([400, 'VALIDATION_FAILED'])
    expect(JSON.parse(dotted.body).details.issues[0]).toMatchObject({ location: 'params', path: 'id' })
  })

  it('another case or a ;param is a path no operation has: 404, which every operation declares', async () => {
    for (const path of ['/V1/TASKS', '/v1/Tasks', '/v1/tasks;x=1', `/v1/profiles/${profileId}/;x`]) {
      const res = await send({ method: 'GET', path, headers: auth() })
      expect([res.status, codeOf(res)], path).toEqual([404, 'NOT_FOUND'])
    }
    for (const [path, item] of Object.entries<Json>(doc.paths))
      for (const method of Object.keys(item)) {
        expect(declared(path, method), `${method} ${path}`).toEqual(expect.arrayContaining(['400', '404']))
      }
  })
})

describe('a body is taken only as the media type its operation declares', () => {
  const create = (headers: Record<string, string>, body: string) =>
    send({ method: 'POST', path: '/v1/profiles', headers: { ...auth(), ...headers }, body })
  const valid = () =>
    JSON.stringify({ name: 'Q', slug: `q-${Math.random().toString(36).slice(2, 8)}`, api_key_id: 'x' })

  it('JSON without a JSON content type (none, text/plain, a form) is 415 UNSUPPORTED_MEDIA_TYPE, and nothing is created', async () => {
    const before = ((await (await s.request('/v1/profiles', { token })).json()) as Json).total
    for (const type of [null, 'text/plain', 'text/plain;charset=UTF-8', 'application/x-www-form-urlencoded']) {
      const res = await create(type ? { 'content-type': type } : {}, valid())
      expect([res.status, codeOf(res)], String(type)).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE'])
      expect(JSON.parse(res.body).details, String(type)).toEqual({ expected: 'application/json', received: type })
    }
    expect(((await (await s.request('/v1/profiles', { token })).json()) as Json).total).toBe(before)
    // JSON with parameters, and the +json types, are JSON.
    for (const type of ['application/json; charset=utf-8', 'application/merge-patch+json']) {
      const body = JSON.stringify({ name: 'Q', slug: `q-${type.length}`, api_key_id: keyId })
      expect((await create({ 'content-type': type }, body)).status, type).toBe(201)
    }
  })

  it('an upload not sent as multipart/form-data and a webhook body not sent as JSON are 415 too', async () => {
    const upload = await send({
      method: 'POST',
      path: '/v1/workspaces/ws_0nothere0000000000/files',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: '{"path":"a"}',
    })
    expect([upload.status, codeOf(upload)]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE'])
    const pb = (await (
      await s.request('/v1/playbooks', {
        method: 'POST',
        token,
        json: { profile_id: profileId, name: 'Hook', prompt: 'x', trigger_type: 'webhook' },
      })
    ).json()) as Json
    const hook = await send({
      method: 'POST',
      path: `/api/playbooks/${pb.id}/webhook/${pb.webhook_secret}`,
      headers: { 'content-type': 'text/plain' },
      body: '{"event":"push"}',
    })
    expect([hook.status, codeOf(hook)]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE'])
    const runs = (await (await s.request(`/v1/playbooks/${pb.id}/runs`, { token })).json()) as Json
    expect(runs.total).toBe(0)
    expect(declared('/v1/workspaces/{id}/files', 'post')).toContain('415')
    expect(declared('/api/playbooks/{id}/webhook/{secret}', 'post')).toContain('415')
    expect(declared('/v1/profiles', 'post')).toContain('415')
    expect(declared('/v1/profiles', 'get')).not.toContain('415')
  })
})

describe('a body sent to an operation that takes none', () => {
  const profile = () => `/v1/profiles/${profileId}`

  it('is 400, and the operation does not run', async () => {
    const get = await send({
      method: 'GET',
      path: '/v1/tasks',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: '{}',
    })
    expect([get.status, codeOf(get)]).toEqual([400, 'VALIDATION_FAILED'])
    expect(JSON.parse(get.body).details.issues).toEqual([
      { location: 'body', path: '', message: 'this operation takes no body: send none' },
    ])
    const del = await send({ method: 'DELETE', path: profile(), headers: auth(), body: 'x' })
    expect(del.status).toBe(400)
    expect((await s.request(profile(), { token })).status).toBe(200)
    // An empty body is no body.
    const empty = await send({
      method: 'POST',
      path: '/v1/tasks/task_0nothere000000000/cancel',
      headers: auth(),
      body: '',
    })
    expect(empty.status).toBe(404)
  })

  it('is answered before the body is read: 2 MiB declared and never sent, or a chunked body never ended', async () => {
    const declaredLength = await send({
      method: 'GET',
      path: profile(),
      headers: { ...auth(), 'content-length': String(2 * 1024 * 1024) },
      body: 'x'.repeat(1024),
      unfinished: true,
    })
    expect([declaredLength.status, declaredLength.headers.connection]).toEqual([400, 'close'])
    const chunked = await send({
      method: 'POST',
      path: '/v1/tasks/task_0nothere000000000/cancel',
      headers: { ...auth(), 'transfer-encoding': 'chunked' },
      body: 'x'.repeat(1024),
      unfinished: true,
    })
    expect([chunked.status, chunked.headers.connection]).toEqual([400, 'close'])
    // The server goes on answering.
    expect((await s.request('/health')).status).toBe(200)
  })
})
