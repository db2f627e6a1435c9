import SwaggerParser from '@apidevtools/swagger-parser'
import * as v from 'valibot'
import { describe, expect, it } from 'vitest'
import {
  buildOpenApi,
  defineRoute,
  ERROR_STATUS,
  IdParams,
  routes,
  type AnyRoute,
  type ErrorCode,
  type OpenApiDocument,
} from '@berth/core'
import {
  ANY_VALUE_DESCRIPTION,
  toOpenApiPath,
  type OpenApiOperation,
  type OpenApiSchema,
} from '../src/openapi/index.js'

const INFO = { title: 'Berth', version: '0.0.0-test' }
const doc = buildOpenApi(routes, INFO)

const opOf = (d: OpenApiDocument, r: Pick<AnyRoute, 'method' | 'path'>): OpenApiOperation | undefined =>
  d.paths[toOpenApiPath(r.path)]?.[r.method.toLowerCase() as 'get']

/** One synthetic route for the edge cases the real table does not have (yet). */
const route = (def: Partial<AnyRoute> & Pick<AnyRoute, 'method' | 'path'>): AnyRoute =>
  defineRoute({
    name: `test.${def.method}.${def.path}`,
    auth: 'caller',
    tag: 'test',
    summary: 'test',
    handle: () => undefined,
    ...def,
  } as AnyRoute)

const REF = '#/components/schemas/'
function resolve(d: OpenApiDocument, s: OpenApiSchema): OpenApiSchema {
  return s.$ref?.startsWith(REF) ? d.components.schemas[s.$ref.slice(REF.length)]! : s
}

/**
 * Paths of every subschema that says nothing about its value: `{}` or a schema without a
 * type, reference, combinator, enum or const (an intended "any" carries a description).
 */
function untyped(schema: unknown, at = '#'): string[] {
  if (typeof schema === 'boolean') return []
  if (typeof schema !== 'object' || schema === null) return [`${at} (not a schema)`]
  const s = schema as Record<string, unknown>
  const typed =
    ['type', '$ref', 'anyOf', 'oneOf', 'allOf', 'enum', 'const'].some((k) => k in s) ||
    s.description === ANY_VALUE_DESCRIPTION
  const out = typed ? [] : [at]
  for (const k of ['additionalProperties', 'items', 'propertyNames', 'contains'])
    if (k in s) out.push(...untyped(s[k], `${at}/${k}`))
  for (const k of ['anyOf', 'oneOf', 'allOf', 'prefixItems']) {
    if (Array.isArray(s[k]))
      for (const [i, x] of (s[k] as unknown[]).entries()) out.push(...untyped(x, `${at}/${k}/${i}`))
  }
  if (s.properties) for (const [k, x] of Object.entries(s.properties)) out.push(...untyped(x, `${at}/properties/${k}`))
  return out
}

/** Every schema an operation carries: parameters, request body, responses. */
function operationSchemas(op: OpenApiOperation): Array<[string, OpenApiSchema]> {
  const out: Array<[string, OpenApiSchema]> = []
  for (const p of op.parameters ?? []) out.push([`${op.operationId} param ${p.name}`, p.schema])
  for (const [type, m] of Object.entries(op.requestBody?.content ?? {}))
    if (m.schema) out.push([`${op.operationId} body ${type}`, m.schema])
  for (const [status, res] of Object.entries(op.responses)) {
    for (const [type, m] of Object.entries(res.content ?? {}))
      if (m.schema) out.push([`${op.operationId} ${status} ${type}`, m.schema])
  }
  return out
}

const operations = (d: OpenApiDocument) => Object.values(d.paths).flatMap((item) => Object.values(item))

describe('the OpenAPI document of the route table', () => {
  it('is a valid OpenAPI 3.1.0 document', async () => {
    expect(doc.openapi).toBe('3.1.0')
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeTruthy()
  })

  it('has every route with its method, path and operationId, and nothing else', () => {
    for (const r of routes as readonly AnyRoute[]) {
      const op = opOf(doc, r)
      expect(op, `${r.method} ${r.path}`).toBeDefined()
      expect(op!.operationId).toBe(r.name)
      expect(op!.tags).toEqual([r.tag])
      expect(op!.summary).toBe(r.summary)
      if (r.description) expect(op!.description).toBe(r.description)
    }
    expect(operations(doc)).toHaveLength(routes.length)
    expect(doc.paths['/v1/profiles/{id}']?.get?.operationId).toBe('profiles.get')
    expect(doc.tags.map((t) => t.name)).toEqual([...new Set((routes as readonly AnyRoute[]).map((r) => r.tag))])
  })

  it('documents path parameters as required and query parameters with their defaults', () => {
    const get = doc.paths['/v1/profiles/{id}']!.get!
    expect(get.parameters).toEqual([
      { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^prof_[a-z0-9]{1,64}$' } },
    ])
    const list = doc.paths['/v1/memory']!.get!
    expect(list.parameters?.map((p) => [p.name, p.in, p.required])).toEqual([
      ['page', 'query', false],
      ['limit', 'query', false],
      ['cursor', 'query', false],
      ['profile_id', 'query', false],
      ['type', 'query', false],
    ])
    expect(list.parameters?.find((p) => p.name === 'limit')?.schema).toMatchObject({
      type: 'integer',
      minimum: 1,
      maximum: 100,
      default: 20,
    })
  })

  it('documents bodies as required JSON and success responses by status', () => {
    const create = doc.paths['/v1/profiles']!.post!
    expect(create.requestBody).toEqual({
      required: true,
      content: { 'application/json': { schema: { $ref: `${REF}CreateProfile` } } },
    })
    expect(create.responses['201']?.content?.['application/json']?.schema).toEqual({ $ref: `${REF}Profile` })
    expect(doc.paths['/v1/profiles/{id}']!.get!.responses['200']?.content?.['application/json']?.schema).toEqual({
      $ref: `${REF}Profile`,
    })
    const del = doc.paths['/v1/profiles/{id}']!.delete!
    expect(del.responses['204']).toBeDefined()
    expect(del.responses['204']!.content).toBeUndefined()
    expect(doc.paths['/health']!.get!.responses['200']?.content?.['application/json']?.schema).toEqual({
      $ref: `${REF}Health`,
    })
    // A body the handler reads itself is documented too: optional, any JSON.
    expect(doc.paths['/api/playbooks/{id}/webhook/{secret}']!.post!.requestBody).toMatchObject({
      required: false,
      description: expect.stringContaining('64 KiB'),
      content: { 'application/json': { schema: { description: 'Any JSON value.' } } },
    })
    expect(doc.paths['/v1/tasks']!.get!.requestBody).toBeUndefined()
  })

  it('publishes the named resource schemas as components', () => {
    for (const name of [
      'Profile',
      'ProfileSummary',
      'ApiKey',
      'Memory',
      'Secret',
      'Tool',
      'Skill',
      'Agent',
      'User',
      'McpServer',
      'ErrorBody',
    ]) {
      expect(doc.components.schemas[name], name).toBeDefined()
    }
    expect(doc.components.schemas.Profile).toMatchObject({
      type: 'object',
      required: expect.arrayContaining(['id', 'claude_md']),
    })
    expect(doc.components.schemas.ProfileSummary?.properties).not.toHaveProperty('claude_md')
    expect(doc.components.schemas.ErrorBody).toMatchObject({
      type: 'object',
      required: ['error', 'code'],
      properties: { code: { type: 'string', enum: Object.keys(ERROR_STATUS) } },
    })
    // No standalone-schema leftovers inside the document.
    expect(JSON.stringify(doc)).not.toMatch(/"\$schema"|"\$defs"|#\/\$defs/)
  })

  it('gives every route the error responses its auth level and inputs imply, all with ErrorBody', () => {
    for (const r of routes as readonly AnyRoute[]) {
      const op = opOf(doc, r)!
      // 431 is the HTTP server's, on every operation, without a body.
      expect(op.responses['431'], r.name).toBeDefined()
      const statuses = Object.keys(op.responses)
        .filter((s) => Number(s) >= 400 && s !== '431')
        .map(Number)
      // Any operation: 400 for a path with an empty or dot segment or a body it does not
      // take, 404 for a path no operation has.
      const expected = new Set<number>([400, 404, 500])
      if (r.auth !== 'public') expected.add(401)
      if (r.auth === 'admin') expected.add(403)
      if (r.auth !== 'public' && !r.unlimited) expected.add(429)
      if (r.body || r.rawBody || r.multipart) expected.add(413).add(415)
      for (const code of r.errors ?? []) expected.add(ERROR_STATUS[code])
      expect(new Set(statuses), `${r.name}`).toEqual(expected)
      for (const s of statuses) {
        const content = op.responses[String(s)]!.content!['application/json']!
        expect(content.schema).toEqual({ $ref: `${REF}ErrorBody` })
        for (const [code, ex] of Object.entries(content.examples ?? {})) {
          expect(ERROR_STATUS[code as ErrorCode]).toBe(s)
          expect(ex.value).toMatchObject({ code, error: expect.any(String) })
        }
      }
      expect(op.security).toEqual(r.auth === 'public' ? [] : [{ bearerAuth: [] }])
    }
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' })
  })

  it('documents Retry-After and the RateLimit headers on rate-limited routes only', () => {
    const list = doc.paths['/v1/profiles']!.get!
    expect(Object.keys(list.responses['429']!.headers ?? {})).toEqual([
      'Retry-After',
      'RateLimit-Policy',
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
    ])
    expect(list.responses['429']!.content!['application/json']!.examples).toHaveProperty('RATE_LIMITED')
    expect(Object.keys(list.responses['200']!.headers ?? {})).toEqual([
      'RateLimit-Policy',
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
    ])
    // A failed authentication takes a token of the client address: its answer says so too.
    expect(Object.keys(list.responses['401']!.headers ?? {})).toEqual([
      'RateLimit-Policy',
      'RateLimit-Limit',
      'RateLimit-Remaining',
      'RateLimit-Reset',
    ])
    const health = doc.paths['/health']!.get!
    expect(health.responses['429']).toBeUndefined()
    expect(health.responses['401']).toBeUndefined()
    expect(health.responses['200']!.headers).toBeUndefined()
    for (const name of ['Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']) {
      expect(doc.components.headers[name]?.schema).toMatchObject({ type: 'integer' })
    }
  })

  it('has no operation schema (or component) that silently lost its type', () => {
    const problems: string[] = []
    for (const op of operations(doc)) {
      for (const [where, schema] of operationSchemas(op)) {
        expect(Object.keys(schema).length, where).toBeGreaterThan(0)
        problems.push(...untyped(resolve(doc, schema)).map((p) => `${where} ${p}`))
      }
    }
    for (const [name, schema] of Object.entries(doc.components.schemas))
      problems.push(...untyped(schema).map((p) => `${name} ${p}`))
    expect(problems).toEqual([])
    // The checker itself sees an empty schema.
    expect(untyped({ type: 'object', properties: { a: {} } })).toEqual(['#/properties/a'])
  })

  it('states the error model, the extension codes and Idempotency-Key in info.description', () => {
    const text = doc.info.description
    expect(doc.info).toMatchObject(INFO)
    expect(text).toMatch(/\{ error, code, details\? \}/)
    expect(text).toMatch(/METHOD_NOT_ALLOWED.*405/)
    expect(text).toMatch(/PAYLOAD_TOO_LARGE.*413/)
    expect(text).toMatch(/UNSUPPORTED_MEDIA_TYPE.*415/)
    expect(text).toMatch(/dot segment.*refused with 400/)
    expect(text).toMatch(/Idempotency-Key.*not honoured/)
    for (const [code, status] of Object.entries(ERROR_STATUS)) expect(text).toContain(`| \`${code}\` | ${status} |`)
    expect(buildOpenApi([], { ...INFO, description: 'Hello.' }).info.description).toMatch(
      /^Hello\.\n\n## Authentication/,
    )
  })

  it("describes the WebSocket's messages from the contract's schemas (x-websocket on /v1/ws)", () => {
    const ws = doc.paths['/v1/ws']?.get?.['x-websocket']
    expect(ws).toBeDefined()
    const types = (union: OpenApiSchema) =>
      ((union.oneOf ?? union.anyOf ?? []) as OpenApiSchema[]).map(
        (m) => (m.properties?.type as OpenApiSchema | undefined)?.const,
      )
    expect(types(ws!.client_messages)).toEqual([
      'submit',
      'subscribe',
      'unsubscribe',
      'decide',
      'send',
      'interrupt',
      'ping',
    ])
    expect(types(ws!.server_messages)).toEqual(['submitted', 'task.status', 'task.event', 'error', 'pong'])
    // The same named shapes as the HTTP routes: a submitted task is a SubmitTask, a status message carries a Task.
    const submit = (ws!.client_messages.oneOf as OpenApiSchema[])[0]!
    expect(submit.properties?.task).toEqual({ $ref: `${REF}SubmitTask` })
    const status = (ws!.server_messages.oneOf as OpenApiSchema[])[1]!
    expect(status.properties?.task).toEqual({ $ref: `${REF}Task` })
    expect(untyped(ws!.client_messages)).toEqual([])
    expect(untyped(ws!.server_messages)).toEqual([])
    // Only the WebSocket route carries it.
    const carriers = Object.values(doc.paths)
      .flatMap((p) => Object.values(p))
      .filter((op) => op && 'x-websocket' in op)
    expect(carriers.map((op) => op!.operationId)).toEqual(['ws'])
  })
})

describe('buildOpenApi on routes the table does not have yet', () => {
  const extra = [
    route({ method: 'GET', path: '/x/page', auth: 'public', unlimited: true, produces: 'text/html' }),
    route({
      method: 'GET',
      path: '/x/:id/download',
      params: IdParams('workspace'),
      query: v.object({ path: v.array(v.string()) }),
      produces: 'application/x-tar',
    }),
    route({
      method: 'POST',
      path: '/x/tasks',
      body: v.strictObject({ prompt: v.string() }),
      response: v.object({ task_id: v.string() }),
      status: 202,
      errors: ['CONCURRENCY_LIMIT'],
    }),
    route({
      method: 'GET',
      path: '/x/callback/:provider',
      auth: 'public',
      params: v.object({ provider: v.picklist(['github', 'gitlab']) }),
      status: 302,
    }),
    route({ method: 'GET', path: '/x/any', response: v.object({ data: v.unknown() }) }),
  ]
  const d = buildOpenApi(extra, INFO)

  it('stays valid', async () => {
    await expect(SwaggerParser.validate(structuredClone(d) as never)).resolves.toBeTruthy()
  })

  it('uses the produces content type for non-JSON responses', () => {
    expect(d.paths['/x/page']!.get!.responses['200']!.content).toEqual({ 'text/html': { schema: { type: 'string' } } })
    // Raw bytes: the media type alone, no (empty) schema.
    expect(d.paths['/x/{id}/download']!.get!.responses['200']!.content).toEqual({ 'application/x-tar': {} })
  })

  it('documents query arrays as repeated keys', () => {
    const p = d.paths['/x/{id}/download']!.get!.parameters!
    expect(p.find((x) => x.name === 'path')).toEqual({
      name: 'path',
      in: 'query',
      required: true,
      schema: { type: 'array', items: { type: 'string' } },
      style: 'form',
      explode: true,
    })
  })

  it('documents 202, 302 with Location, and merges route.errors into the status they share', () => {
    const post = d.paths['/x/tasks']!.post!
    expect(post.responses['202']!.content!['application/json']!.schema).toMatchObject({ type: 'object' })
    expect(Object.keys(post.responses['429']!.content!['application/json']!.examples!)).toEqual([
      'RATE_LIMITED',
      'CONCURRENCY_LIMIT',
    ])
    expect(post.responses['429']!.description).toMatch(/RATE_LIMITED.*CONCURRENCY_LIMIT/)
    const cb = d.paths['/x/callback/{provider}']!.get!
    expect(cb.responses['302']!.headers).toHaveProperty('Location')
    expect(cb.parameters![0]).toMatchObject({
      name: 'provider',
      in: 'path',
      required: true,
      schema: { enum: ['github', 'gitlab'] },
    })
    expect(cb.security).toEqual([])
  })

  it('marks an intended "any value" so it is told apart from a lost type', () => {
    const s = d.paths['/x/any']!.get!.responses['200']!.content!['application/json']!.schema!
    expect(s.properties?.data).toEqual({ description: ANY_VALUE_DESCRIPTION })
  })

  it('refuses schemas JSON Schema cannot express instead of publishing {}', () => {
    const bad = route({ method: 'POST', path: '/x/bad', body: v.object({ when: v.date() }) })
    expect(() => buildOpenApi([bad], INFO)).toThrow(/test\.POST\.\/x\/bad.*"date" schema/)
    const custom = route({ method: 'POST', path: '/x/custom', body: v.object({ n: v.pipe(v.number(), v.toString()) }) })
    expect(() => buildOpenApi([custom], INFO)).not.toThrow() // input mode stops before the transform
  })

  it('refuses params missing from the path and duplicate operations', () => {
    expect(() => buildOpenApi([route({ method: 'GET', path: '/x', params: IdParams('task') })], INFO)).toThrow(
      /params id are not in the path/,
    )
    const a = route({ method: 'GET', path: '/x' })
    expect(() => buildOpenApi([a, { ...a, name: 'other' }], INFO)).toThrow(/duplicate route GET \/x/)
    expect(() => buildOpenApi([a, { ...a, path: '/y' }], INFO)).toThrow(/duplicate route name/)
  })

  it('publishes a request form of a named schema whose input and output differ', () => {
    const Count = v.object({ n: v.pipe(v.string(), v.transform(Number), v.number()) })
    const Wrapper = v.object({ count: Count })
    const r = route({ method: 'POST', path: '/x/count', body: Wrapper, response: Wrapper })
    const dd = buildOpenApi([r], INFO, { schemas: { Count, Wrapper } })
    expect(dd.components.schemas.Count?.properties?.n).toEqual({ type: 'number' })
    expect(dd.components.schemas.CountInput?.properties?.n).toEqual({ type: 'string' })
    expect(dd.components.schemas.WrapperInput?.properties?.count).toEqual({ $ref: `${REF}CountInput` })
    const op = dd.paths['/x/count']!.post!
    expect(op.requestBody!.content['application/json']!.schema).toEqual({ $ref: `${REF}WrapperInput` })
    expect(op.responses['200']!.content!['application/json']!.schema).toEqual({ $ref: `${REF}Wrapper` })
    expect(dd.components.schemas).toHaveProperty('ErrorBody')
  })
})
