/**
 * `/console`: the browser console (`@berth/console`), served from its built assets through
 * an allow-list (no path reaches the disk) with a strict Content-Security-Policy: the page
 * loads only its own script and stylesheet and talks only to this origin's API and socket.
 */
import { loadConsoleAssets, type ConsoleAsset } from '@berth/console'
import { ApiError, errorResponse } from '@berth/core'
import type { H3, H3Event } from 'h3'
import { cachedResponse } from './docs.js'

/** Same origin only, no inline script or style, no framing, no referrer. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

const SECURITY_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
}

/**
 * Mount the console on an h3 app: `GET /console` (the page; `/console/` too) and
 * `GET /console/assets/:file`. Assets are read once, at mount.
 *
 * @example
 * ```ts
 * mountConsole(app) // before the app's catch-all route
 * ```
 */
export function mountConsole(app: H3): void {
  let assets: Map<string, ConsoleAsset> | undefined
  const all = () => (assets ??= loadConsoleAssets())
  all()
  const page = (event: H3Event) => {
    const index = all().get('index.html')!
    // Asset URLs are relative to the page: from `/console/` they are `assets/…`.
    const html = event.url.pathname.endsWith('/')
      ? new TextEncoder().encode(new TextDecoder().decode(index.body).replaceAll('"console/assets/', '"assets/'))
      : index.body
    const etag = event.url.pathname.endsWith('/') ? `${index.etag.slice(0, -1)}-dir"` : index.etag
    return cachedResponse(event.req, html, etag, {
      'content-type': index.type,
      'cache-control': 'no-cache',
      ...SECURITY_HEADERS,
    })
  }
  const asset = (event: H3Event) => {
    const raw = event.url.pathname.split('/').pop() ?? ''
    const file = raw === 'index.html' || raw === 'manifest.json' ? undefined : all().get(raw)
    if (!file) return errorResponse(new ApiError('NOT_FOUND', `No console asset ${JSON.stringify(raw.slice(0, 100))}`))
    return cachedResponse(event.req, file.body, file.etag, {
      'content-type': file.type,
      'cache-control': 'no-cache',
      ...SECURITY_HEADERS,
    })
  }
  // HEAD answers wherever GET does (Node drops the body of a HEAD response).
  for (const method of ['GET', 'HEAD'] as const) {
    app.on(method, '/console', page)
    app.on(method, '/console/', page)
    app.on(method, '/console/assets/:file', asset)
  }
}
