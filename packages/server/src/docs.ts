/**
 * `GET /docs`: the interactive request builder (Swagger UI), served fully offline. The page
 * and its scripts come from Berth itself: swagger-ui-dist's files, copied into the build
 * (`dist/swagger-ui`; from the installed package when running from source), through an
 * allow-list, so nothing is fetched from another host.
 */
import { ApiError, defineRoute } from '@berth/core'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { SWAGGER_UI_FILES } from './docs-assets.js'
import { VERSION } from './version.js'

/** The initializer: reads the document's URL from the page and turns on bearer auth persistence. */
const INIT_SCRIPT = `(function () {
  var root = document.getElementById('swagger-ui');
  window.ui = SwaggerUIBundle({
    url: new URL(root.getAttribute('data-spec-url'), window.location.href).href,
    dom_id: '#swagger-ui',
    deepLinking: true,
    persistAuthorization: true,
    tryItOutEnabled: true,
    displayRequestDuration: true,
    filter: true,
    // The default renders a badge fetched from validator.swagger.io: no network here.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout'
  });
})();
`

const JS = 'text/javascript; charset=utf-8'

const TYPES: Record<string, string> = {
  js: JS,
  map: 'application/json; charset=utf-8',
  css: 'text/css; charset=utf-8',
  png: 'image/png',
}

/** Every file `/docs/assets/:file` serves; anything else is a 404 (no path ever reaches the disk). */
const ASSETS = new Map<string, { type: string; from: 'swagger-ui-dist' | 'berth' }>([
  ...SWAGGER_UI_FILES.map(
    (name) => [name, { type: TYPES[name.split('.').pop()!]!, from: 'swagger-ui-dist' as const }] as const,
  ),
  ['berth-docs.js', { type: JS, from: 'berth' }],
])

interface Loaded {
  body: Uint8Array<ArrayBuffer>
  etag: string
}

const requireHere = createRequire(import.meta.url)
let distDir: string | undefined
/** swagger-ui-dist's directory, found through the package's own resolution. */
function swaggerUiDir(): string {
  const copied = fileURLToPath(new URL('./swagger-ui', import.meta.url))
  distDir ??= existsSync(copied) ? copied : dirname(requireHere.resolve('swagger-ui-dist/package.json'))
  return distDir
}

/** The served swagger-ui-dist version (the copy's `VERSION`, else the installed package's). */
function swaggerUiVersion(): string {
  const dir = swaggerUiDir()
  if (existsSync(join(dir, 'VERSION'))) return readFileSync(join(dir, 'VERSION'), 'utf8').trim()
  return (requireHere(join(dir, 'package.json')) as { version: string }).version
}

const loaded = new Map<string, Promise<Loaded>>()
function load(name: string, from: 'swagger-ui-dist' | 'berth'): Promise<Loaded> {
  let p = loaded.get(name)
  if (!p) {
    p = (async () => {
      const body =
        from === 'berth'
          ? new TextEncoder().encode(INIT_SCRIPT)
          : new Uint8Array(await readFile(join(swaggerUiDir(), name)))
      return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` }
    })()
    // A failed read is retried on the next request rather than cached.
    p.catch(() => loaded.delete(name))
    loaded.set(name, p)
  }
  return p
}

/**
 * A response with an ETag, or a 304 when the request already holds that version.
 *
 * @example
 * ```ts
 * return cachedResponse(request, body, etag, { 'content-type': 'text/css', 'cache-control': 'no-cache' })
 * ```
 */
export function cachedResponse(
  request: Request,
  body: Uint8Array<ArrayBuffer> | string,
  etag: string,
  headers: Record<string, string>,
): Response {
  const all = { ...headers, etag, 'x-content-type-options': 'nosniff' }
  const held = request.headers.get('if-none-match')
  if (held?.split(',').some((t) => t.trim().replace(/^W\//, '') === etag))
    return new Response(null, { status: 304, headers: all })
  return new Response(body, { status: 200, headers: all })
}

/**
 * The docs page. URLs are relative to the page, so it also works when Berth is mounted under
 * a prefix in another app: from `/docs` assets are `docs/assets/…`, from `/docs/` `assets/…`.
 *
 * @example
 * ```ts
 * docsHtml('/docs') // '<!doctype html>…<script src="docs/assets/swagger-ui-bundle.js?v=…">…'
 * ```
 */
export function docsHtml(pathname: string): string {
  const dir = pathname.endsWith('/') ? '' : 'docs/'
  const spec = pathname.endsWith('/') ? '../openapi.json' : 'openapi.json'
  // Part of every asset URL, so an upgrade of Berth or Swagger UI never meets a stale cache.
  const v = encodeURIComponent(`${swaggerUiVersion()}-${VERSION}`)
  const asset = (name: string) => `${dir}assets/${name}?v=${v}`
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Berth API</title>
<link rel="stylesheet" href="${asset('swagger-ui.css')}">
<link rel="icon" type="image/png" href="${asset('favicon-32x32.png')}" sizes="32x32">
<link rel="icon" type="image/png" href="${asset('favicon-16x16.png')}" sizes="16x16">
</head>
<body>
<div id="swagger-ui" data-spec-url="${spec}"></div>
<script src="${asset('swagger-ui-bundle.js')}"></script>
<script src="${asset('berth-docs.js')}"></script>
</body>
</html>
`
}

/** Same-origin only: the page can load its own assets and call this API, nothing else. */
const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  // Swagger UI sets inline styles.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'self'",
].join('; ')

export const docsPage = defineRoute({
  name: 'docs',
  method: 'GET',
  path: '/docs',
  auth: 'public',
  tag: 'system',
  summary: 'Interactive request builder (Swagger UI), served offline',
  description:
    'Reads `/openapi.json`; use **Authorize** to send your caller key with every request (kept across reloads).',
  unlimited: true,
  produces: 'text/html',
  handle: ({ request }) =>
    new Response(docsHtml(new URL(request.url).pathname), {
      headers: {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-cache',
        'content-security-policy': PAGE_CSP,
        'x-content-type-options': 'nosniff',
      },
    }),
})

export const docsAsset = defineRoute({
  name: 'docs.asset',
  method: 'GET',
  path: '/docs/assets/:file',
  auth: 'public',
  tag: 'system',
  summary: 'A script, stylesheet or icon of the docs page',
  description: `Only these files exist: ${[...ASSETS.keys()].map((n) => `\`${n}\``).join(', ')}. Answers 304 to a matching If-None-Match.`,
  unlimited: true,
  produces: '*/*',
  handle: async ({ request }) => {
    // The last path segment, decoded the way the router decodes `:file`.
    const raw = new URL(request.url).pathname.split('/').pop() ?? ''
    let name: string
    try {
      name = decodeURIComponent(raw)
    } catch {
      name = raw
    }
    const asset = ASSETS.get(name)
    if (!asset) throw new ApiError('NOT_FOUND', `No docs asset ${JSON.stringify(name.slice(0, 100))}`)
    const { body, etag } = await load(name, asset.from)
    return cachedResponse(request, body, etag, {
      'content-type': asset.type,
      // The page's URLs carry the versions, so a day of caching never outlives an upgrade.
      'cache-control': 'public, max-age=86400',
    })
  },
})
