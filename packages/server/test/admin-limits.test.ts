/** The operator's read views: a user's keys, and rate and concurrency state per caller. */
import { afterEach, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, startServer, type TestServer } from './helpers.js'

let s: TestServer | undefined
afterEach(async () => {
  await s?.close()
  s = undefined
})

describe('admin views', () => {
  it("lists a user's keys without tokens, and drops revoked ones", async () => {
    s = await startServer()
    const res = await s.request('/admin/users', { method: 'POST', token: ADMIN_TOKEN, json: { name: 'Ada' } })
    const { user, key } = (await res.json()) as { user: { id: string }; key: { id: string; token: string } }
    const second = (await (await s.request(`/admin/users/${user.id}/keys`, { method: 'POST', token: ADMIN_TOKEN, json: { name: 'ci' } })).json()) as { id: string }
    const other = await s.user('Someone else')

    const list = async () => (await (await s!.request(`/admin/users/${user.id}/keys`, { token: ADMIN_TOKEN })).json()) as { keys: Record<string, unknown>[]; total: number }
    const before = await list()
    expect(before.total).toBe(2)
    expect(before.keys.map((k) => k.id).sort()).toEqual([key.id, second.id].sort())
    expect(before.keys.find((k) => k.id === second.id)?.name).toBe('ci')
    expect(JSON.stringify(before)).not.toContain(key.token)
    expect(before.keys.every((k) => !('hash' in k) && !('token' in k))).toBe(true)
    // Another user's keys are not in the list.
    expect(before.keys.every((k) => k.user_id === user.id)).toBe(true)
    expect(other.id).not.toBe(user.id)

    expect((await s.request(`/admin/keys/${key.id}`, { method: 'DELETE', token: ADMIN_TOKEN })).status).toBe(204)
    expect((await list()).keys.map((k) => k.id)).toEqual([second.id])
    expect((await s.request('/admin/users/usr_zzzzzzzzzzzzzzzzzzzz/keys', { token: ADMIN_TOKEN })).status).toBe(404)
    expect((await s.request(`/admin/users/${user.id}/keys`, { token: other.token })).status).toBe(403)
  })

  it("shows each caller's remaining requests as they are spent and refilled", async () => {
    s = await startServer({ rateLimit: { rpm: 60, burst: 5 } })
    const alice = await s.user('Alice')
    const limits = async () => (await (await s!.request('/admin/limits', { token: ADMIN_TOKEN })).json()) as { rate: { burst: number; rpm: number; callers: { caller_id: string; remaining: number }[] }; concurrency: { limit: number; profiles: unknown[] } }

    const fresh = await limits()
    expect(fresh.rate).toMatchObject({ burst: 5, rpm: 60 })
    expect(fresh.rate.callers.find((c) => c.caller_id === alice.id)).toBeUndefined()
    expect(fresh.concurrency).toEqual({ limit: 5, profiles: [] })

    for (let i = 0; i < 3; i++) expect((await s.request('/v1/profiles', { token: alice.token })).status).toBe(200)
    expect((await limits()).rate.callers.find((c) => c.caller_id === alice.id)?.remaining).toBe(2)
    // Reading the limits spends none of the operator's requests.
    const operator = async () => (await limits()).rate.callers.find((c) => c.caller_id === 'usr_operator')?.remaining
    const spent = await operator()
    expect(spent).toBe(4) // creating Alice took one
    expect(await operator()).toBe(spent)
    // A minute later the bucket is full again, and the caller is no longer listed.
    s.clock.advance(60_000)
    expect((await limits()).rate.callers.find((c) => c.caller_id === alice.id)).toBeUndefined()
  })
})
