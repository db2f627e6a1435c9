/** The git credential helper the runner writes, driven by the host's real git. */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { setupGitCredentials } from '../src/git-credentials.js'

const parent = mkdtempSync(join(tmpdir(), 'berth-git-cred-test-'))
afterAll(() => rmSync(parent, { recursive: true, force: true }))
afterEach(() => {
  for (const d of readdirSync(parent)) rmSync(join(parent, d), { recursive: true, force: true })
})

/** `git credential fill` for a URL, with only the given environment (no user or system config). */
function fill(
  env: Record<string, string>,
  host: string,
): { username?: string; password?: string; status: number | null } {
  const run = spawnSync('git', ['credential', 'fill'], {
    input: `protocol=https\nhost=${host}\n\n`,
    encoding: 'utf8',
    env: { PATH: process.env.PATH!, HOME: parent, GIT_CONFIG_NOSYSTEM: '1', ...env },
  })
  const out = Object.fromEntries(
    run.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  )
  return { username: out.username, password: out.password, status: run.status }
}

describe('git credentials in a run', () => {
  const creds = [
    { host: 'github.com', username: 'x-access-token', token: 'ghu_0123456789abcdef' },
    {
      host: '10.88.0.1:8443',
      username: 'oauth2',
      token: 'glo_fedcba9876543210',
      ca_pem: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
    },
  ]

  it('answers git with the token for its host (port included), and nothing for other hosts', () => {
    const setup = setupGitCredentials(creds, {}, parent)
    expect(fill(setup.env, 'github.com')).toMatchObject({
      username: 'x-access-token',
      password: 'ghu_0123456789abcdef',
      status: 0,
    })
    expect(fill(setup.env, '10.88.0.1:8443')).toMatchObject({
      username: 'oauth2',
      password: 'glo_fedcba9876543210',
      status: 0,
    })
    // No helper answer and no terminal: git gives up instead of prompting.
    expect(fill(setup.env, 'gitlab.com').password).toBeUndefined()
  })

  it('keeps tokens out of the environment, in a 0600 file in a 0700 directory, with the CA per host', () => {
    const setup = setupGitCredentials(creds, {}, parent)
    const env = JSON.stringify(setup.env)
    for (const c of creds) expect(env).not.toContain(c.token)
    const [dir] = readdirSync(parent)
    const base = join(parent, dir!)
    expect(statSync(base).mode & 0o777).toBe(0o700)
    expect(statSync(join(base, 'credentials')).mode & 0o777).toBe(0o600)
    expect(readFileSync(join(base, 'credentials'), 'utf8')).toContain('glo_fedcba9876543210')
    const caKey = Object.entries(setup.env).find(([, v]) => v === 'http.https://10.88.0.1:8443/.sslCAInfo')![0]
    const caPath = setup.env[caKey.replace('KEY', 'VALUE')]!
    expect(readFileSync(caPath, 'utf8')).toBe(creds[1]!.ca_pem)
    setup.cleanup()
    expect(existsSync(base)).toBe(false)
  })

  it("appends to a task's own GIT_CONFIG_* entries instead of replacing them", () => {
    const own = { GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'user.name', GIT_CONFIG_VALUE_0: 'Agent' }
    const setup = setupGitCredentials(creds.slice(0, 1), own, parent)
    expect(setup.env.GIT_CONFIG_COUNT).toBe('2')
    expect(setup.env.GIT_CONFIG_KEY_1).toBe('credential.helper')
    const env = { ...own, ...setup.env }
    expect(
      spawnSync('git', ['config', 'user.name'], {
        env: { PATH: process.env.PATH!, HOME: parent, ...env },
        encoding: 'utf8',
      }).stdout.trim(),
    ).toBe('Agent')
    expect(fill(env, 'github.com').password).toBe('ghu_0123456789abcdef')
  })
})
