/**
 * The standalone server on `BERTH_STORAGE=postgres`, as an operator runs it: its records
 * are in the database, not in its data dir, so a second server with another data dir (or
 * the first, restarted) serves the same users, keys and lists. One instance, memory
 * coordination; the runtime is `local` (no container is started here).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startPostgres, type LocalPostgres } from '@berth/testkit'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { SERVER } from './multi-instance.helpers.js'
import { REPO_ROOT, bareEnv, freePort, startStandalone } from './standalone.helpers.js'

const ADMIN = 'operator-token-postgres-standalone'
let pg: LocalPostgres
const dirs: string[] = []
beforeAll(async () => {
  pg = await startPostgres()
})
afterAll(async () => {
  await pg?.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

async function start(settings: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-pg-standalone-'))
  dirs.push(dataDir)
  const port = await freePort()
  return startStandalone({
    command: SERVER,
    cwd: join(REPO_ROOT, 'examples/standalone-server'),
    port,
    env: bareEnv({
      PORT: String(port),
      BERTH_ADMIN_TOKEN: ADMIN,
      BERTH_DATA_DIR: dataDir,
      BERTH_RUNTIME: 'local',
      // Secrets are encrypted with this key: both servers must share it, as instances do.
      BERTH_ENCRYPTION_KEY: Buffer.alloc(32, 7).toString('base64'),
      ...settings,
    }),
  })
}

const call = async (url: string, path: string, token: string, body?: unknown) => {
  const res = await fetch(`${url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

it('keeps users, keys and lists in Postgres: another server on the same database serves them', async () => {
  const first = await start({ BERTH_STORAGE: 'postgres', BERTH_DATABASE_URL: pg.url })
  let token: string
  try {
    expect(first.output()).toContain(`Storage: postgres (${pg.url})`)
    const made = await call(first.url, '/admin/users', ADMIN, { name: 'Postgres user' })
    expect(made.status).toBe(201)
    token = (made.body.key as { token: string }).token
    for (const n of [1, 2, 3]) {
      const row = await call(first.url, '/v1/memory', token, { type: 'fact', name: `fact ${n}`, body: `body ${n}` })
      expect(row.status).toBe(201)
    }
  } finally {
    await first.stop()
  }
  const second = await start({ BERTH_STORAGE: 'postgres', BERTH_DATABASE_URL: pg.url })
  try {
    // The caller's key (stored as a hash) works here, and the list comes in order with its count.
    const rows = await call(second.url, '/v1/memory?limit=2', token)
    expect(rows.status).toBe(200)
    expect(rows.body.total).toBe(3)
    expect((rows.body.memory as { name: string }[]).map((m) => m.name)).toEqual(['fact 3', 'fact 2'])
    const users = await call(second.url, '/admin/users', ADMIN)
    expect(JSON.stringify(users.body)).toContain('Postgres user')
  } finally {
    await second.stop()
  }
}, 120_000)

it('refuses to start without BERTH_DATABASE_URL, or on a database it cannot reach, naming the setting', async () => {
  await expect(start({ BERTH_STORAGE: 'postgres' })).rejects.toThrow(/BERTH_STORAGE=postgres needs BERTH_DATABASE_URL/)
  const closed = await freePort()
  await expect(
    start({ BERTH_STORAGE: 'postgres', BERTH_DATABASE_URL: `postgres://berth:pw@127.0.0.1:${closed}/berth` }),
  ).rejects.toThrow(/Postgres database at postgres:\/\/berth:\*\*\*@127\.0\.0\.1:\d+\/berth could not be opened/)
}, 120_000)
