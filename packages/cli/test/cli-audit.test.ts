/** `berth audit` (the package's bin, built output, a real process) against a real server. */
import { type BerthRun, runBerth } from './cli.helpers.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, startServer, type TestServer } from '../../server/test/helpers.js'

/** Run `berth …` to its end. */
const berth = (args: string[], token: string): Promise<BerthRun> => runBerth(s.url, token, args)

let s: TestServer
let a: { token: string; id: string }
let secretId: string

beforeAll(async () => {
  s = await startServer()
  a = await s.user('A')
  const res = await s.request('/v1/secrets', { method: 'POST', token: a.token, json: { name: 'TOKEN', value: 'v' } })
  secretId = ((await res.json()) as { id: string }).id
})
afterAll(() => s.close())

describe('berth audit', () => {
  it('lists your entries as JSON, filtered', async () => {
    const run = await berth(['audit', '--json', '--action', 'secret.created'], a.token)
    expect(run.code).toBe(0)
    const { entries, total } = JSON.parse(run.stdout) as { entries: { target: { id: string } }[]; total: number }
    expect(total).toBe(1)
    expect(entries[0]!.target.id).toBe(secretId)
  })

  it('--all lists the deployment as a table (admin); a bad filter is refused', async () => {
    const run = await berth(['audit', '--all', '--target', a.id], ADMIN_TOKEN)
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/ACTION/)
    expect(run.stdout).toContain('user.created')
    expect(run.stdout).toContain(`user:${a.id}`)
    expect(run.stdout).not.toContain('secret.created')
    const bad = await berth(['audit', '--action', 'secret.stolen'], a.token)
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/action/)
  })
})
