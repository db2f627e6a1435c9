import { afterEach, expect, it } from 'vitest'
import { startServer, type TestServer } from './helpers.js'

let s: TestServer | undefined
afterEach(async () => {
  await s?.close()
  s = undefined
})

async function burst(server: TestServer, token: string, n: number) {
  return Promise.all(Array.from({ length: n }, () => server.request('/v1/profiles', { token })))
}

it('admits exactly `burst` concurrent requests, then refills at the configured rate', async () => {
  s = await startServer({ rateLimit: { rpm: 60, burst: 10 } })
  // Creating the user goes through the admin API under the operator's own bucket.
  const { token } = await s.user()
  const first = await burst(s, token, 25)
  expect(first.filter((r) => r.status === 200)).toHaveLength(10)
  const refused = first.filter((r) => r.status === 429)
  expect(refused).toHaveLength(15)
  const body = (await refused[0]!.json()) as { code: string }
  expect(body.code).toBe('RATE_LIMITED')
  expect(refused[0]!.headers.get('retry-after')).toBe('1')
  expect(refused[0]!.headers.get('ratelimit-remaining')).toBe('0')
  expect(refused[0]!.headers.get('ratelimit-limit')).toBe('10')

  // 60 per minute is one per second: half a second gives nothing, a second gives one.
  s.clock.advance(500)
  expect((await burst(s, token, 3)).filter((r) => r.status === 200)).toHaveLength(0)
  s.clock.advance(500)
  expect((await burst(s, token, 3)).filter((r) => r.status === 200)).toHaveLength(1)
  // Five seconds later, five more; never more than the bucket holds.
  s.clock.advance(5_000)
  expect((await burst(s, token, 10)).filter((r) => r.status === 200)).toHaveLength(5)
  s.clock.advance(3_600_000)
  expect((await burst(s, token, 30)).filter((r) => r.status === 200)).toHaveLength(10)
})

it('reports RateLimit headers on every /v1 response and keeps callers apart', async () => {
  s = await startServer({ rateLimit: { rpm: 120, burst: 3 } })
  const a = await s.user('A')
  const b = await s.user('B')
  const res = await s.request('/v1/profiles', { token: a.token })
  expect(res.headers.get('ratelimit-limit')).toBe('3')
  expect(res.headers.get('ratelimit-remaining')).toBe('2')
  expect(Number(res.headers.get('ratelimit-reset'))).toBeGreaterThan(0)
  expect((await burst(s, a.token, 5)).filter((r) => r.status === 200)).toHaveLength(2)
  // B's bucket is untouched by A.
  expect((await burst(s, b.token, 3)).filter((r) => r.status === 200)).toHaveLength(3)
  // Errors count too, and carry the headers: a 404 is still a request.
  const notFound = await s.request('/v1/profiles/prof_zzzz', { token: b.token })
  expect(notFound.status).toBe(429)
  // Health is public and never limited.
  for (let i = 0; i < 20; i++) expect((await s.request('/health')).status).toBe(200)
  // 120 per minute: one token every 500 ms.
  s.clock.advance(500)
  const refilled = await s.request('/v1/profiles', { token: b.token })
  expect(refilled.status).toBe(200)
})
