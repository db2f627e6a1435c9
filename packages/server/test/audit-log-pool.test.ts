/** The audit entry of a force-removed container, on the `local` runtime (a real engine, no daemon needed). */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { localRuntime } from '@berth/adapter-local'
import { silentLogger } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN_TOKEN, clientFor, startServer, type TestServer } from './helpers.js'
import { sweep, uniquePoolName } from './pool.helpers.js'

const baseDir = mkdtempSync(join(tmpdir(), 'berth-audit-pool-'))
const runtime = localRuntime({ baseDir, logger: silentLogger, sandbox: 'none' })
const pool = uniquePoolName('audit')
let s: TestServer

beforeAll(async () => {
  s = await startServer({ runtime, pool: { image: 'local', min: 0, max: 1, name: pool }, broker: false })
  await s.berth.ready
})
afterAll(async () => {
  await s.close()
  await sweep(runtime, pool)
  rmSync(baseDir, { recursive: true, force: true })
})

describe('audit log: containers', () => {
  it('a force-removed container is recorded for the admin and for the caller it worked for', async () => {
    const holder = await s.user('holder')
    const lease = await s.berth.pool!.claim({ owner_id: holder.id, purpose: 'batch' })
    const id = lease.container.id
    await clientFor(s, ADMIN_TOKEN).pool.containers.delete({ params: { id } })
    const { entries } = await clientFor(s, ADMIN_TOKEN).admin.audit.list({
      query: { action: 'container.force_removed' },
    })
    expect(entries).toHaveLength(1)
    expect(entries[0]).toMatchObject({
      actor: { type: 'admin', id: 'usr_operator' },
      target: { type: 'container', id },
      outcome: 'success',
    })
    expect(entries[0]!.request_id).toMatch(/^req_/)
    const own = await clientFor(s, holder.token).audit.list({ query: { target: id } })
    expect(own.entries.map((e) => e.action)).toEqual(['container.force_removed'])
  })
})
