/** Retries: idempotent calls only, on transient failures, honouring Retry-After. */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { BerthError, createBerthClient } from '@berth/client'

const HEALTH = { ok: true, version: 'test', pool: { min: 0, max: 0, in_use: 0, idle: 0 } }
const closers: (() => Promise<void>)[] = []
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()))
})

/**
 * A tiny node:http server that answers with `script[n]` on its n-th request (the last
 * entry repeats) and records every request.
 */
async function scripted(script: ((res: ServerResponse) => void)[]) {
  const hits: { method: string; url: string }[] = []
  const server = createServer((req: IncomingMessage, res) => {
    hits.push({ method: req.method!, url: req.url! })
    req.resume()
    script[Math.min(hits.length - 1, script.length - 1)]!(res)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  closers.push(() => {
    server.closeAllConnections()
    return new Promise((r) => server.close(() => r()))
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits }
}

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}) =>
  (res: ServerResponse) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers })
    res.end(JSON.stringify(body))
  }
/** The BerthError a call rejects with. */
async function rejection(call: Promise<unknown>): Promise<BerthError> {
  const err = await call.then(
    () => new Error('expected a rejection'),
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(BerthError)
  return err as BerthError
}

const unavailable = json(503, { error: 'Briefly away', code: 'BAD_GATEWAY' })

describe('retries', () => {
  it('retries a GET after a 503 and returns the second answer', async () => {
    const srv = await scripted([unavailable, json(200, HEALTH)])
    const client = createBerthClient({ baseURL: srv.url, retry: { delay: 5 } })
    expect(await client.health()).toEqual(HEALTH)
    expect(srv.hits.map((h) => h.method)).toEqual(['GET', 'GET'])
  })

  it('never retries a POST', async () => {
    const srv = await scripted([unavailable, json(201, {})])
    const client = createBerthClient({ baseURL: srv.url, token: 't', retry: { retries: 5, delay: 5 } })
    const err = await client.apiKeys.create({ body: { name: 'k', provider: 'stub' } }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(BerthError)
    expect(err).toMatchObject({ status: 503, code: 'BAD_GATEWAY' })
    expect(srv.hits).toEqual([{ method: 'POST', url: '/v1/api-keys' }])
  })

  it('never retries a PATCH', async () => {
    const srv = await scripted([unavailable])
    const client = createBerthClient({ baseURL: srv.url, token: 't', retry: { delay: 5 } })
    await expect(client.profiles.update({ params: { id: 'prof_x' }, body: {} })).rejects.toMatchObject({ status: 503 })
    expect(srv.hits).toHaveLength(1)
  })

  it('retries a DELETE on 502 and gives up after the configured retries', async () => {
    const srv = await scripted([json(502, { error: 'upstream', code: 'BAD_GATEWAY' })])
    const client = createBerthClient({ baseURL: srv.url, token: 't', retry: { retries: 2, delay: 1 } })
    await expect(client.profiles.delete({ params: { id: 'prof_x' } })).rejects.toMatchObject({ status: 502 })
    expect(srv.hits).toHaveLength(3)
  })

  it('does not retry errors that will not change (404, 400, 500)', async () => {
    for (const status of [404, 400, 500]) {
      const srv = await scripted([json(status, { error: 'no', code: 'NOT_FOUND' })])
      const client = createBerthClient({ baseURL: srv.url, token: 't', retry: { delay: 1 } })
      await expect(client.profiles.get({ params: { id: 'prof_x' } })).rejects.toMatchObject({ status })
      expect(srv.hits).toHaveLength(1)
    }
  })

  it('waits for Retry-After on a 429', async () => {
    const srv = await scripted([
      json(429, { error: 'slow down', code: 'RATE_LIMITED' }, { 'retry-after': '1' }),
      json(200, HEALTH),
    ])
    const client = createBerthClient({ baseURL: srv.url, retry: { delay: 1 } })
    const started = Date.now()
    await client.health()
    expect(Date.now() - started).toBeGreaterThanOrEqual(950)
    expect(srv.hits).toHaveLength(2)
  })

  it('does not wait for a Retry-After beyond maxDelay: the 429 is thrown at once', async () => {
    const srv = await scripted([json(429, { error: 'slow down', code: 'RATE_LIMITED' }, { 'retry-after': '120' })])
    const client = createBerthClient({ baseURL: srv.url, retry: { maxDelay: 5_000 } })
    const err = await rejection(client.health())
    expect(err).toMatchObject({ status: 429, code: 'RATE_LIMITED' })
    expect(err.headers?.get('retry-after')).toBe('120')
    expect(srv.hits).toHaveLength(1)
  })

  it('retries a GET after a network error, counted through a custom fetch', async () => {
    let calls = 0
    const client = createBerthClient({
      baseURL: 'http://berth.invalid',
      retry: { retries: 1, delay: 1 },
      fetch: async () => {
        calls++
        if (calls === 1) throw new TypeError('fetch failed', { cause: new Error('socket hang up') })
        return Response.json(HEALTH)
      },
    })
    expect(await client.health()).toEqual(HEALTH)
    expect(calls).toBe(2)
  })

  it('reports a timeout as TIMEOUT and an abort as ABORTED, status 0', async () => {
    const srv = await scripted([() => {}]) // never answers
    const client = createBerthClient({ baseURL: srv.url, retry: false })
    await expect(client.health(undefined, { timeout: 50 })).rejects.toMatchObject({ status: 0, code: 'TIMEOUT' })
    const controller = new AbortController()
    const pending = client.health(undefined, { signal: controller.signal })
    setTimeout(() => controller.abort(), 20)
    await expect(pending).rejects.toMatchObject({ status: 0, code: 'ABORTED' })
  })

  it('an abort during the wait before a retry rejects at once as ABORTED, with no further attempt', async () => {
    const srv = await scripted([unavailable, json(200, HEALTH)])
    // A wait far longer than the test: only the abort can end it.
    const client = createBerthClient({ baseURL: srv.url, retry: { delay: 60_000, maxDelay: 60_000 } })
    const controller = new AbortController()
    const pending = client.health(undefined, { signal: controller.signal })
    await vi.waitFor(() => expect(srv.hits).toHaveLength(1))
    controller.abort()
    await expect(pending).rejects.toMatchObject({ status: 0, code: 'ABORTED' })
    expect(srv.hits).toHaveLength(1)
  })

  it('turns a non-Berth error body (a proxy page) into HTTP_ERROR', async () => {
    const srv = await scripted([
      (res) => {
        res.writeHead(502, { 'content-type': 'text/html' })
        res.end('<h1>Bad gateway</h1>')
      },
    ])
    const client = createBerthClient({ baseURL: srv.url, retry: false })
    const err = await rejection(client.health())
    expect(err).toMatchObject({ status: 502, code: 'HTTP_ERROR', body: '<h1>Bad gateway</h1>' })
  })
})
