/**
 * What the Postgres store adds to the conformance suite: schema migrations when several
 * instances start at once, refusing a schema newer than the code, and TLS with a private CA.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execFileSync } from 'node:child_process'
import { indexEntryFor } from '@berth/core'
import { postgresStore } from '@berth/server'
import { startPostgres, type LocalPostgres } from '@berth/testkit'
import { selfSignedCert } from '@berth/testkit/providers'
import { afterAll, beforeAll, expect, it } from 'vitest'

let pg: LocalPostgres
let dir: string
let ca: string
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-pg-tls-'))
  const cert = selfSignedCert({ ips: ['127.0.0.1'], dns: ['localhost'] })
  ca = join(dir, 'ca.pem')
  writeFileSync(ca, cert.cert)
  pg = await startPostgres({ tls: cert })
}, 60_000)
afterAll(async () => {
  await pg?.stop()
  rmSync(dir, { recursive: true, force: true })
})

const psql = (sql: string) =>
  execFileSync(join(pg.binDir, 'psql'), ['-At', '-v', 'ON_ERROR_STOP=1', pg.url, '-c', sql], {
    encoding: 'utf8',
  }).trim()

it('several instances starting at once on an empty schema migrate it once and all work', async () => {
  const stores = await Promise.all(
    Array.from({ length: 6 }, () => postgresStore(pg.url, { schema: 'together', max: 2 })),
  )
  expect(psql('SELECT version, name FROM together.berth_migrations ORDER BY version')).toBe(
    '1|records, ordered indexes and their counts',
  )
  await Promise.all(
    stores.map((s, i) => {
      const key = `tasks:usr_1:task_${i}`
      const value = { id: `task_${i}`, status: 'queued', created_at: `2026-01-01T00:00:0${i}.000Z` }
      return s.put(key, value, indexEntryFor(key, value)!)
    }),
  )
  expect(await stores[0]!.list('tasks:usr_1', { term: 'status=queued', offset: 0, limit: 2 })).toMatchObject({
    items: [{ id: 'task_5' }, { id: 'task_4' }],
    total: 6,
  })
  await Promise.all(stores.map((s) => s.close()))
  // Starting again applies nothing.
  const again = await postgresStore(pg.url, { schema: 'together' })
  expect(psql('SELECT count(*) FROM together.berth_migrations')).toBe('1')
  await again.close()
})

it('refuses a schema a newer Berth has migrated', async () => {
  await (await postgresStore(pg.url, { schema: 'newer' })).close()
  psql("INSERT INTO newer.berth_migrations (version, name) VALUES (999, 'from the future')")
  await expect(postgresStore(pg.url, { schema: 'newer' })).rejects.toThrow(
    /schema is at version 999, newer than this Berth knows \(1\)/,
  )
})

it('connects over TLS with a private CA, and refuses a server its CA did not sign', async () => {
  const tlsUrl = `${pg.url}?sslmode=verify-full`
  const store = await postgresStore(tlsUrl, { schema: 'tls', caFile: ca })
  await store.set('misc:tls', { over: 'tls' })
  expect(await store.get('misc:tls')).toEqual({ over: 'tls' })
  await store.close()
  // The session really is encrypted: the server lists Berth's one connection as TLS.
  const verifyCa = await postgresStore(`${pg.url}?sslmode=verify-ca`, { schema: 'tls', caFile: ca, max: 1 })
  expect(await verifyCa.get('misc:tls')).toEqual({ over: 'tls' })
  const berthSessions = (ssl: boolean) =>
    psql(
      `SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'berth' AND s.ssl = ${ssl}`,
    )
  expect([berthSessions(true), berthSessions(false)]).toEqual(['1', '0'])
  await verifyCa.close()
  // Another CA, or the system CAs alone, do not trust this server.
  const other = join(dir, 'other.pem')
  writeFileSync(other, selfSignedCert({ ips: ['127.0.0.1'] }).cert)
  await expect(postgresStore(tlsUrl, { schema: 'tls', caFile: other })).rejects.toThrow(/certificate|self.signed/i)
  await expect(postgresStore(tlsUrl, { schema: 'tls' })).rejects.toThrow(/certificate|self.signed/i)
  // A CA file with a mode that would not use it is a mistake worth refusing.
  await expect(postgresStore(`${pg.url}?sslmode=disable`, { caFile: ca })).rejects.toThrow(/sslmode=disable/)
})
