/** The operator's read views: a user's keys, and rate and concurrency state per caller. */
import { afterEach, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, clientFor, failure, startServer, type TestServer } from './helpers.js'

let s: TestServer | undefined
afterEach(async () => {
  await s?.close()
  s = undefined
})

describe('admin views', () => {
  it("lists a user's keys without tokens, and drops revoked ones", async () => {
    s = await startServer()
    const admin = clientFor(s, ADMIN_TOKEN)
    const { user, key } = await admin.admin.users.create({ body: { name: 'Ada' } })
    const second = await admin.admin.keys.create({ params: { id: user.id }, body: { name: 'ci' } })
    const other = await s.user('Someone else')

    const list = () => admin.admin.keys.list({ params: { id: user.id } })
    const before = await list()
    expect(before.total).toBe(2)
    expect(before.keys.map((k) => k.id).sort()).toEqual([key.id, second.id].sort())
    expect(before.keys.find((k) => k.id === second.id)?.name).toBe('ci')
    expect(JSON.stringify(before)).not.toContain(key.token)
    expect(before.keys.every((k) => !('hash' in k) && !('token' in k))).toBe(true)
    // Another user's keys are not in the list.
    expect(before.keys.every((k) => k.user_id === user.id)).toBe(true)
    expect(other.id).not.toBe(user.id)

    await admin.admin.keys.delete({ params: { id: key.id } })
    expect((await list()).keys.map((k) => k.id)).toEqual([second.id])
    expect((await failure(admin.admin.keys.list({ params: { id: 'usr_zzzzzzzzzzzzzzzzzzzz' } }))).status).toBe(404)
    expect((await failure(clientFor(s, other.token).admin.keys.list({ params: { id: user.id } }))).status).toBe(403)
  })

  it("shows each caller's remaining requests as they are spent and refilled", async () => {
    s = await startServer({ rateLimit: { rpm: 60, burst: 5 } })
    const alice = await s.user('Alice')
    // The rate part is null only on a server without a rate limit; this one has one.
    const limits = async () => {
      const l = await clientFor(s!, ADMIN_TOKEN).admin.limits()
      expect(l.rate).not.toBeNull()
      return { ...l, rate: l.rate! }
    }

    const fresh = await limits()
    expect(fresh.rate).toMatchObject({ burst: 5, rpm: 60 })
    expect(fresh.rate.callers.find((c) => c.caller_id === alice.id)).toBeUndefined()
    expect(fresh.concurrency).toEqual({ limit: 5, profiles: [] })

    for (let i = 0; i < 3; i++) await clientFor(s, alice.token).profiles.list()
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
