/** `berth previews` (the package's bin, built output, a real process) against a real server without an engine. */
import { type BerthRun, runBerth } from './cli.helpers.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type TestServer } from '../../server/test/helpers.js'

/** Run `berth …` to its end. */
const berth = (args: string[], token: string): Promise<BerthRun> => runBerth(s.url, token, args)

let s: TestServer
let a: { token: string; id: string }
let wsId: string

beforeAll(async () => {
  s = await startServer()
  a = await s.user('A')
  // A workspace whose session never got a container (tasks need an engine this test has none of).
  wsId = (await s.berth.services.workspaces.create(a.id, { profile_id: 'prof_none', persistent: false })).id
})
afterAll(() => s.close())

describe('berth previews', () => {
  it('lists (none yet), refuses to open one without a warm container, and a bad port', async () => {
    const ls = await berth(['previews', 'ls', wsId, '--json'], a.token)
    expect(ls.code, ls.stderr).toBe(0)
    expect(JSON.parse(ls.stdout)).toEqual({ previews: [], total: 0, next_cursor: null })
    const open = await berth(['previews', 'open', wsId, '8000'], a.token)
    expect(open.code).not.toBe(0)
    expect(open.stderr).toContain('no warm container')
    const bad = await berth(['previews', 'open', wsId, '70000'], a.token)
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toMatch(/port/)
    const revoke = await berth(['previews', 'revoke', wsId, 'prv_zzzzzzzzzzzzzzzzzzzz'], a.token)
    expect(revoke.code).not.toBe(0)
    expect(revoke.stderr).toMatch(/not found/)
  })
})
