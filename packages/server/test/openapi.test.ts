/**
 * The served OpenAPI document and the offline docs page, over a real HTTP server. The
 * document must describe exactly the mounted table; the table is held against API.md's
 * route list, with what is not built yet named explicitly.
 */
import SwaggerParser from '@apidevtools/swagger-parser'
import { buildOpenApi, type OpenApiDocument } from '@berth/core'
import { readFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type TestServer } from './helpers.js'

/** Every route API.md lists, as `METHOD /path` (API.md "Routes"). */
export const API_MD_ROUTES = [
  // public
  'GET /health',
  'GET /openapi.json',
  'GET /docs',
  'GET /console',
  // unversioned, own authentication
  'POST /api/playbooks/:id/webhook/:secret',
  'GET /api/chatprovider/callback',
  'GET /api/mailprovider/callback',
  'POST /api/chatprovider/events',
  'POST /api/messenger/webhook',
  // tasks
  'POST /v1/tasks',
  'GET /v1/tasks',
  'GET /v1/tasks/:id',
  'GET /v1/tasks/:id/events',
  'POST /v1/tasks/:id/cancel',
  // workspaces
  'GET /v1/workspaces',
  'GET /v1/workspaces/:id',
  'PATCH /v1/workspaces/:id',
  'DELETE /v1/workspaces/:id',
  'GET /v1/workspaces/:id/transcript',
  'GET /v1/workspaces/:id/files',
  'POST /v1/workspaces/:id/files',
  'GET /v1/workspaces/:id/download',
  // profiles
  'GET /v1/profiles',
  'POST /v1/profiles',
  'GET /v1/profiles/:id',
  'PATCH /v1/profiles/:id',
  'DELETE /v1/profiles/:id',
  'GET /v1/profiles/:id/models',
  'GET /v1/profiles/:id/playbooks',
  // model credentials
  'GET /v1/api-keys',
  'POST /v1/api-keys',
  'GET /v1/api-keys/:id',
  'PATCH /v1/api-keys/:id',
  'DELETE /v1/api-keys/:id',
  // playbooks
  'POST /v1/playbooks',
  'GET /v1/playbooks/:id',
  'PATCH /v1/playbooks/:id',
  'DELETE /v1/playbooks/:id',
  'POST /v1/playbooks/:id/run',
  'GET /v1/playbooks/:id/runs',
  // integrations
  'GET /v1/integrations',
  'POST /v1/integrations',
  'PATCH /v1/integrations/:id',
  'DELETE /v1/integrations/:id',
  'POST /v1/integrations/:id/test',
  'GET /v1/integrations/chatprovider/authorize',
  'GET /v1/integrations/mailprovider/authorize',
  'POST /v1/integrations/bankprovider/config',
  'POST /v1/integrations/bankprovider/callback',
  'GET /v1/integrations/messenger/config',
  'POST /v1/integrations/messenger/setup',
  'POST /v1/integrations/messenger/claim',
  // git accounts
  'GET /v1/integrations/git/:provider/authorize',
  'GET /v1/integrations/git/:provider/callback',
  'GET /v1/integrations/git/accounts',
  'DELETE /v1/integrations/git/accounts/:id',
  // memory
  'GET /v1/memory',
  'POST /v1/memory',
  'GET /v1/memory/:id',
  'PATCH /v1/memory/:id',
  'DELETE /v1/memory/:id',
  // secrets
  'GET /v1/secrets',
  'POST /v1/secrets',
  'PATCH /v1/secrets/:id',
  'DELETE /v1/secrets/:id',
  // tools, skills, agents
  ...['tools', 'skills', 'agents'].flatMap((area) => [
    `GET /v1/${area}`,
    `POST /v1/${area}`,
    `GET /v1/${area}/:id`,
    `PATCH /v1/${area}/:id`,
    `DELETE /v1/${area}/:id`,
  ]),
  // pool
  'GET /v1/pool',
  'GET /v1/pool/containers',
  'DELETE /v1/pool/containers/:id',
  // events
  'GET /v1/ws',
  // admin
  'POST /admin/users',
  'GET /admin/users',
  'DELETE /admin/users/:id',
  'POST /admin/users/:id/keys',
  'DELETE /admin/keys/:id',
]

/**
 * Every `METHOD /path` API.md's "Routes" section names (fixtures/api-md-routes.md, its
 * verbatim copy): `GET/PATCH/DELETE /v1/x/:id` and `/v1/{a,b}` expand, queries drop.
 */
function apiMdRoutes(): Set<string> {
  const text = readFileSync(new URL('./fixtures/api-md-routes.md', import.meta.url), 'utf8')
  const out = new Set<string>()
  for (const m of text.matchAll(/`((?:GET|POST|PUT|PATCH|DELETE)(?:\/(?:GET|POST|PUT|PATCH|DELETE))*) (\/[^`\s?]*)/g)) {
    const braces = /\{([a-z,]+)\}/.exec(m[2]!)
    const paths = braces ? braces[1]!.split(',').map((alt) => m[2]!.replace(braces[0], alt)) : [m[2]!]
    for (const method of m[1]!.split('/')) for (const path of paths) out.add(`${method} ${path}`)
  }
  return out
}

/**
 * API.md routes the server does not mount yet. Building one means deleting it here (the
 * test fails until then); a mounted route disappearing fails too.
 */
const NOT_YET_BUILT: string[] = ['GET /console']

/** Mounted routes API.md does not list (kept explicit so none slips in unnoticed). */
const BEYOND_API_MD = [
  // Readiness for load balancers and probes (issue 28; API.md's "Added in this round").
  'GET /health/ready',
  // Reading one account (its status) is also what the contract tests read back after a DELETE.
  'GET /v1/integrations/git/accounts/:id',
  'GET /v1/secrets/:id',
  'GET /docs/assets/:file',
  // Like secrets: every :id resource can be read back (the contract test relies on it).
  'GET /v1/integrations/:id',
  // Delivery attempts the owner can read (API.md: deliveries are retried; this shows them).
  'GET /v1/integrations/:id/deliveries',
  // Rotating the playbook webhook secret (SPEC: the secret is generated, shown, rotatable).
  'POST /v1/playbooks/:id/webhook-secret',
  // What the chat provider's signed events recorded for an integration (API.md: events are verified before acting; this shows what arrived).
  'GET /v1/integrations/:id/events',
  // The console's operator views (issue 16): a user's keys, and rate and concurrency state per caller.
  'GET /admin/users/:id/keys',
  'GET /admin/limits',
  // Usage and spending limits (issue 28; API.md "Added in this round").
  'GET /v1/usage',
  'GET /admin/usage',
  'GET /admin/users/:id/limits',
  'PUT /admin/users/:id/limits',
  // Environments (issue 18): image, network policy, limits and variables of a profile's containers.
  'GET /v1/environments',
  'POST /v1/environments',
  'GET /v1/environments/:id',
  'PATCH /v1/environments/:id',
  'DELETE /v1/environments/:id',
  // Steering a working agent (issue 26): interrupt, messages mid-task, permission requests.
  'POST /v1/tasks/:id/interrupt',
  'POST /v1/tasks/:id/messages',
  'GET /v1/tasks/:id/approvals',
  // Operating (issue 28; this round's API.md section, not yet in the fixture): Prometheus metrics.
  'GET /metrics',
  'POST /v1/tasks/:id/approvals/:request_id',
  // The audit log (issue 28; API.md "Added in this round"): the deployment's for admins, a caller's own.
  'GET /admin/audit',
  'GET /v1/audit',
  // Forking a session (issue 31; API.md "Added in this round").
  'POST /v1/workspaces/:id/fork',
  // Checkpoints of sessions (issue 42): rewind, and the tasks a session can be forked at or rewound to.
  'POST /v1/workspaces/:id/rewind',
  'POST /v1/workspaces/:id/stop',
  'GET /v1/workspaces/:id/checkpoints',
  // Previews of what an agent serves (issue 31; API.md "Added in this round").
  'POST /v1/workspaces/:id/previews',
  'GET /v1/workspaces/:id/previews',
  'DELETE /v1/workspaces/:id/previews/:preview_id',
]

/** `GET /v1/x/:id` and `get /v1/x/{id}` → `GET /v1/x/{}`: parameter names do not matter. */
const key = (method: string, path: string) => `${method.toUpperCase()} ${path.replace(/:\w+|\{\w+\}/g, '{}')}`
const keyOf = (line: string) => key(line.split(' ')[0]!, line.split(' ')[1]!)
const sorted = (xs: Iterable<string>) => [...xs].sort()

let s: TestServer
let doc: OpenApiDocument

beforeAll(async () => {
  s = await startServer()
  const res = await s.request('/openapi.json')
  expect(res.status).toBe(200)
  doc = (await res.json()) as OpenApiDocument
})
afterAll(() => s.close())

const mountedKeys = () => new Set(s.berth.routes.map((r) => key(r.method, r.path)))
const documentedKeys = () =>
  new Set(Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => key(method, path))))

/** A raw GET with the path sent as is (fetch would normalize `..` away). */
function rawGet(url: string, path: string): Promise<{ status: number; type: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url + path, { method: 'GET', path }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (body += c))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'], body }))
    })
    req.on('error', reject)
    req.end()
  })
}

describe('GET /openapi.json', () => {
  it('is public, JSON, and a valid OpenAPI 3.1 document', async () => {
    const res = await s.request('/openapi.json')
    expect(res.headers.get('content-type')).toMatch(/^application\/json/)
    expect(res.headers.get('ratelimit-limit')).toBeNull()
    expect(doc.openapi).toBe('3.1.0')
    const health = (await (await s.request('/health')).json()) as { version: string }
    expect(doc.info).toMatchObject({ title: 'Berth', version: health.version })
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeTruthy()
  })

  it('answers 304 to a matching If-None-Match', async () => {
    const first = await s.request('/openapi.json')
    const etag = first.headers.get('etag')
    expect(etag).toBeTruthy()
    const again = await s.request('/openapi.json', { headers: { 'if-none-match': etag! } })
    expect(again.status).toBe(304)
  })

  it('describes every mounted route with its method and operationId, and nothing else', () => {
    for (const r of s.berth.routes) {
      const op = doc.paths[r.path.replace(/:(\w+)/g, '{$1}')]?.[r.method.toLowerCase() as 'get']
      expect(op, `${r.method} ${r.path}`).toBeDefined()
      expect(op!.operationId).toBe(r.name)
    }
    expect(sorted(documentedKeys())).toEqual(sorted(mountedKeys()))
    // Built from the full mounted table, the server's own routes included.
    expect(doc.paths).toEqual(
      JSON.parse(JSON.stringify(buildOpenApi(s.berth.routes, { title: 't', version: 'v' }).paths)),
    )
    expect(doc.paths['/openapi.json']?.get?.operationId).toBe('openapi')
    expect(doc.paths['/docs']?.get?.operationId).toBe('docs')
  })

  it('API_MD_ROUTES is exactly the route list of API.md, each route once', () => {
    expect(sorted(API_MD_ROUTES)).toEqual(sorted(new Set(API_MD_ROUTES)))
    expect(sorted(API_MD_ROUTES)).toEqual(sorted(apiMdRoutes()))
  })

  it('API.md routes not mounted yet are exactly NOT_YET_BUILT', () => {
    const mounted = mountedKeys()
    const missing = API_MD_ROUTES.filter((line) => !mounted.has(keyOf(line)))
    expect(sorted(missing)).toEqual(sorted(NOT_YET_BUILT))
    // ... so every other API.md route is in the served document.
    const documented = documentedKeys()
    for (const line of API_MD_ROUTES)
      if (!NOT_YET_BUILT.includes(line)) expect(documented.has(keyOf(line)), line).toBe(true)
  })

  it('mounted routes beyond API.md are exactly BEYOND_API_MD', () => {
    const listed = new Set(API_MD_ROUTES.map(keyOf))
    const extra = s.berth.routes.filter((r) => !listed.has(key(r.method, r.path))).map((r) => `${r.method} ${r.path}`)
    expect(sorted(extra)).toEqual(sorted(BEYOND_API_MD))
  })
})

describe('GET /docs', () => {
  /** Every `src`/`href` of the page and the spec URL it reads, resolved against the page. */
  function references(html: string, page: string): string[] {
    const refs = [...html.matchAll(/\s(?:src|href|data-spec-url)="([^"]*)"/g)].map((m) => m[1]!)
    return refs.map((r) => new URL(r, page).href)
  }

  for (const page of ['/docs', '/docs/']) {
    it(`${page} is an HTML page whose every reference is a local asset that loads`, async () => {
      const res = await s.request(page)
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toMatch(/^text\/html/)
      expect(res.headers.get('content-security-policy')).toMatch(
        /default-src 'none'.*script-src 'self'.*connect-src 'self'/,
      )
      const html = await res.text()
      expect(html).not.toMatch(/https?:\/\//i)
      expect(html).not.toMatch(/<script>|\son\w+=/i) // no inline script: the CSP forbids it
      const refs = references(html, s.url + page)
      expect(refs.length).toBeGreaterThanOrEqual(4)
      const types: Record<string, RegExp> = {
        'swagger-ui-bundle.js': /^text\/javascript/,
        'berth-docs.js': /^text\/javascript/,
        'swagger-ui.css': /^text\/css/,
        'favicon-32x32.png': /^image\/png$/,
        'favicon-16x16.png': /^image\/png$/,
        'openapi.json': /^application\/json/,
      }
      const seen = new Set<string>()
      for (const ref of refs) {
        const url = new URL(ref)
        expect(url.origin).toBe(s.url)
        const name = url.pathname.split('/').pop()!
        expect(types[name], `unexpected reference ${ref}`).toBeDefined()
        expect(url.pathname).toBe(name === 'openapi.json' ? '/openapi.json' : `/docs/assets/${name}`)
        const asset = await fetch(ref)
        expect(asset.status, ref).toBe(200)
        expect(asset.headers.get('content-type'), ref).toMatch(types[name]!)
        expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(0)
        seen.add(name)
      }
      expect(sorted(seen)).toEqual(sorted(Object.keys(types)))
    })
  }

  it('starts Swagger UI on /openapi.json with persisted bearer auth and no outside validator', async () => {
    const init = await (await s.request('/docs/assets/berth-docs.js')).text()
    expect(init).toMatch(/SwaggerUIBundle\(/)
    expect(init).toMatch(/persistAuthorization: true/)
    expect(init).toMatch(/validatorUrl: null/)
    expect(init).not.toMatch(/https?:\/\//)
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' })
    const bundle = await (await s.request('/docs/assets/swagger-ui-bundle.js')).text()
    expect(bundle).toContain('SwaggerUIBundle')
  })

  it('caches assets and answers 304 to a matching If-None-Match', async () => {
    const res = await s.request('/docs/assets/swagger-ui.css')
    expect(res.headers.get('cache-control')).toMatch(/public, max-age=\d+/)
    expect(res.headers.get('x-content-type-options')).toBe('nosniff')
    const etag = res.headers.get('etag')!
    expect(etag).toMatch(/^".+"$/)
    const again = await s.request('/docs/assets/swagger-ui.css', { headers: { 'if-none-match': etag } })
    expect(again.status).toBe(304)
    expect(await again.text()).toBe('')
  })

  it('serves only allow-listed assets: traversal and unknown names are 404 in the error shape', async () => {
    // A dot segment never reaches a route: refused before routing.
    const dots = await rawGet(s.url, '/docs/assets/../package.json')
    expect(dots.status).toBe(400)
    expect(JSON.parse(dots.body)).toMatchObject({ code: 'VALIDATION_FAILED' })
    for (const path of [
      '/docs/assets/..%2Fpackage.json',
      '/docs/assets/%2e%2e%2fpackage.json',
      '/docs/assets/%2E%2E%2F%2E%2E%2Fpackage.json',
      '/docs/assets/..%5Cpackage.json',
      '/docs/assets/package.json',
      '/docs/assets/swagger-ui.js', // in the package, not on the list
      '/docs/assets/index.html',
      '/docs/assets/__proto__',
      '/docs/assets/constructor',
      '/docs/assets/nope.js',
      '/docs/assets/swagger-ui.css%00.png',
    ]) {
      const res = await rawGet(s.url, path)
      expect(res.status, path).toBe(404)
      expect(res.type, path).toMatch(/^application\/json/)
      expect(JSON.parse(res.body), path).toMatchObject({ code: 'NOT_FOUND', error: expect.any(String) })
      expect(res.body).not.toContain('"version"')
    }
  })
})
