/** `/console` on @berth/server: on only when asked, a strict CSP, an allow-list of files. */
import { afterEach, describe, expect, it } from 'vitest'
import { startServer, type TestServer } from '../../server/test/helpers.js'

let s: TestServer | undefined
afterEach(async () => {
  await s?.close()
  s = undefined
})

describe('/console', () => {
  it('is not mounted unless the console option is on', async () => {
    s = await startServer()
    const res = await s.request('/console')
    expect(res.status).toBe(404)
    expect((await res.json()).code).toBe('NOT_FOUND')
  })

  it('serves the page and its assets offline under a strict Content-Security-Policy', async () => {
    s = await startServer({ console: true })
    for (const path of ['/console', '/console/']) {
      const res = await s.request(path)
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toMatch(/^text\/html/)
      const csp = res.headers.get('content-security-policy')!
      expect(csp).toContain("default-src 'none'")
      expect(csp).toContain("script-src 'self'")
      expect(csp).toContain("frame-ancestors 'none'")
      expect(csp).not.toMatch(/unsafe-(inline|eval)/)
      expect(res.headers.get('referrer-policy')).toBe('no-referrer')
      const html = await res.text()
      // Relative to the page either way: `/console` → `console/assets/…`, `/console/` → `assets/…`.
      const script = html.match(/<script src="([^"]+)"/)![1]!
      const asset = await s.request(new URL(script, `${s.url}${path}`).pathname)
      expect(asset.status).toBe(200)
      expect(asset.headers.get('content-type')).toMatch(/^text\/javascript/)
    }
    // HEAD answers wherever GET does.
    const head = await s.request('/console', { method: 'HEAD' })
    expect(head.status).toBe(200)
    expect(head.headers.get('content-security-policy')).toContain("default-src 'none'")
    const css = await s.request('/console/assets/console.css')
    expect(css.headers.get('content-type')).toMatch(/^text\/css/)
    const etag = css.headers.get('etag')!
    expect((await s.request('/console/assets/console.css', { headers: { 'if-none-match': etag } })).status).toBe(304)
    // Nothing else is reachable: no manifest, no traversal.
    for (const path of [
      '/console/assets/manifest.json',
      '/console/assets/..%2Fpackage.json',
      '/console/assets/nope.js',
    ]) {
      const res = await s.request(path)
      expect(res.status, path).toBe(404)
      expect((await res.json()).code).toBe('NOT_FOUND')
    }
  })
})
