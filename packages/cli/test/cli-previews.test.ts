/** `berth previews` (the package's bin, built output, a real process) against a real server without an engine. */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type TestServer } from '../../server/test/helpers.js'

const BIN = fileURLToPath(new URL('../bin/berth.mjs', import.meta.url))

/** Run `berth …` to its end. */
function berth(args: string[], token: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, BERTH_URL: s.url, BERTH_TOKEN: token, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

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
    expect(JSON.parse(ls.stdout)).toEqual({ previews: [], total: 0 })
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
