import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { BerthClient } from '@berth/client'
import { ADMIN_TOKEN, clientFor, failure, startServer, type TestServer } from './helpers.js'

let s: TestServer
let a: { token: string; id: string }
let b: { token: string; id: string }
let apiA: BerthClient
let apiB: BerthClient

type Listed = { total: number; next_cursor: string | null } & Record<string, unknown>
const get = async (token: string, path: string): Promise<{ status: number; body: Listed }> => {
  const res = await s.request(path, { token })
  return { status: res.status, body: (await res.json()) as Listed }
}
const names = (items: unknown) => (items as { name: string }[]).map((x) => x.name)

beforeAll(async () => {
  s = await startServer()
  a = await s.user('A')
  b = await s.user('B')
  apiA = clientFor(s, a.token)
  apiB = clientFor(s, b.token)
  for (let i = 0; i < 23; i++) {
    await apiA.skills.create({ body: { name: `skill-${i}`, body: `# Skill ${i}` } })
    s.clock.advance(1000)
    await apiA.memory.create({ body: { type: i % 3 === 0 ? 'fact' : 'preference', name: `m${i}`, body: 'x' } })
  }
  await apiB.skills.create({ body: { name: 'b-only', body: '# B' } })
})
afterAll(() => s.close())

describe('cursor paging on lists', () => {
  it('walks a list by cursor: every item once, in the list order, null at the end', async () => {
    const whole = await apiA.skills.list({ query: { limit: 100 } })
    expect(whole.total).toBe(23)
    expect(whole.next_cursor).toBeNull()
    const seen: string[] = []
    let cursor: string | undefined
    for (let round = 0; round < 10; round++) {
      const page = await apiA.skills.list({ query: { limit: 5, ...(cursor && { cursor }) } })
      expect(page.total).toBe(23)
      expect(page.skills.length).toBeLessThanOrEqual(5)
      seen.push(...names(page.skills))
      if (page.next_cursor === null) break
      cursor = page.next_cursor
    }
    expect(seen).toEqual(names(whole.skills))
    // A numbered page carries a cursor too, to the same next page.
    const third = await apiA.skills.list({ query: { page: 2, limit: 5 } })
    const byCursor = await apiA.skills.list({ query: { limit: 5, cursor: third.next_cursor! } })
    expect(names(byCursor.skills)).toEqual(names(whole.skills).slice(10, 15))
  })

  it('keeps a filter on every page, and the client iterates every page', async () => {
    const facts: string[] = []
    for await (const m of apiA.paginate('memory.list', { query: { type: 'fact', limit: 2 } })) facts.push(m.name)
    expect(facts.sort()).toEqual(['m0', 'm12', 'm15', 'm18', 'm21', 'm3', 'm6', 'm9'])
    const all: string[] = []
    for await (const skill of apiA.paginate('skills.list', { query: { limit: 4 } })) all.push(skill.name)
    expect(all).toEqual(names((await apiA.skills.list({ query: { limit: 100 } })).skills))
    const users: string[] = []
    for await (const u of clientFor(s, ADMIN_TOKEN).paginate('admin.users.list', { query: { limit: 1 } }))
      users.push(u.id)
    expect(users).toEqual(expect.arrayContaining([a.id, b.id]))
    expect(new Set(users).size).toBe(users.length)
  })

  it('refuses page and cursor together, and a cursor Berth did not hand out', async () => {
    const { next_cursor } = await apiA.skills.list({ query: { limit: 5 } })
    const both = await failure(apiA.skills.list({ query: { limit: 5, page: 2, cursor: next_cursor! } }))
    expect(both.status).toBe(400)
    expect(both.code).toBe('VALIDATION_FAILED')
    expect(both.details).toMatchObject({ issues: [{ location: 'query', path: 'cursor' }] })
    const mid = Math.floor(next_cursor!.length / 2)
    const flipped = next_cursor![mid] === 'A' ? 'B' : 'A'
    for (const bad of [
      'garbage',
      'x'.repeat(300),
      next_cursor!.slice(0, mid) + flipped + next_cursor!.slice(mid + 1),
    ]) {
      const res = await get(a.token, `/v1/skills?limit=5&cursor=${encodeURIComponent(bad)}`)
      expect(res.status).toBe(400)
      expect(res.body).toMatchObject({ code: 'VALIDATION_FAILED', error: expect.stringContaining('cursor') })
    }
  })

  it("a cursor is its list's only: not another caller's, filter's or list's", async () => {
    const { next_cursor } = await apiA.skills.list({ query: { limit: 5 } })
    const theirs = await get(b.token, `/v1/skills?limit=5&cursor=${next_cursor}`)
    expect(theirs.status).toBe(400)
    expect(JSON.stringify(theirs.body)).not.toContain('skill-')
    expect((await get(a.token, `/v1/tools?limit=5&cursor=${next_cursor}`)).status).toBe(400)
    const facts = await apiA.memory.list({ query: { type: 'fact', limit: 2 } })
    expect((await get(a.token, `/v1/memory?type=preference&cursor=${facts.next_cursor}`)).status).toBe(400)
    expect((await get(a.token, `/v1/memory?type=fact&cursor=${facts.next_cursor}`)).status).toBe(200)
  })

  it('the OpenAPI document shows cursor and next_cursor on every list', async () => {
    const doc = (await (await s.request('/openapi.json')).json()) as {
      paths: Record<string, Record<string, { parameters?: { name: string }[]; responses: Record<string, unknown> }>>
    }
    const lists = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.values(ops)
        .filter((op) => op.parameters?.some((p) => p.name === 'page'))
        .map((op) => ({ path, op })),
    )
    expect(lists.length).toBeGreaterThan(15)
    for (const { path, op } of lists) {
      expect(
        op.parameters!.map((p) => p.name),
        path,
      ).toContain('cursor')
      expect(JSON.stringify(op.responses['200']), path).toContain('next_cursor')
    }
  })
})
