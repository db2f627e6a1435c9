/** The audit log's store side: owners and filters, time ranges, retention, failed authentication per address and minute, integrations. */
import { isApiError, type AuditQuery } from '@berth/contract'
import { describe, expect, it } from 'vitest'
import { inRequest } from '../src/audit/context.js'
import { AuditLog } from '../src/audit/log.js'
import { memoryHub } from '../src/coordination/memory-hub.js'
import { memoryCoordination } from '../src/coordination/memory.js'
import { manualClock } from '../src/ports/clock.js'
import { DeliveryLog } from '../src/integrations/deliveries.js'
import { IntegrationsService } from '../src/integrations/integrations.js'
import { createAesGcmCipher } from '../src/ports/cipher.js'
import { countingStore, quietLogger } from './task-fakes.js'

const START = Date.parse('2026-01-01T00:00:00Z')

function setup(retentionDays?: number) {
  const clock = manualClock(START)
  const store = countingStore()
  const coordination = memoryCoordination({ clock })
  const audit = new AuditLog({ store, clock, logger: quietLogger, coordination, retentionDays })
  return { clock, store, coordination, audit }
}

const q = (query: Partial<AuditQuery> = {}): AuditQuery => ({ page: 1, limit: 20, ...query })
const admin = { id: 'usr_admin', role: 'admin' as const }
const user = { id: 'usr_a', role: 'user' as const }

describe('audit log', () => {
  it('takes actor, request id and source from the request; lists for the deployment, the actor and the user concerned', async () => {
    const { audit } = setup()
    await inRequest({ caller: admin, request_id: 'req_1', source: '203.0.113.7' }, () =>
      audit.record({ action: 'key.issued', target: { type: 'caller_key', id: 'ck_1' }, owner: 'usr_a' }),
    )
    await audit.record({ action: 'approval.decided', target: { type: 'approval', id: 'apr_1' } })
    const all = await audit.list(null, q())
    expect(all.total).toBe(2)
    expect(all.items[1]).toMatchObject({
      actor: { type: 'admin', id: 'usr_admin' },
      action: 'key.issued',
      target: { type: 'caller_key', id: 'ck_1' },
      outcome: 'success',
      request_id: 'req_1',
      source: '203.0.113.7',
    })
    expect(all.items[0]).toMatchObject({ actor: { type: 'system', id: null }, request_id: null, source: null })
    expect(all.items[1]).not.toHaveProperty('owners')
    expect((await audit.list('usr_a', q())).items.map((e) => e.target.id)).toEqual(['ck_1'])
    expect((await audit.list('usr_admin', q())).items.map((e) => e.target.id)).toEqual(['ck_1'])
    expect((await audit.list('usr_b', q())).total).toBe(0)
  })

  it('filters by actor, action and target, pages newest first', async () => {
    const { audit, clock } = setup()
    for (let i = 0; i < 25; i++) {
      clock.advance(1000)
      const caller = i % 2 ? admin : user
      await inRequest({ caller, request_id: `req_${i}`, source: null }, () =>
        audit.record({
          action: i % 3 ? 'secret.updated' : 'secret.created',
          target: { type: 'secret', id: `sec_${i % 5}` },
        }),
      )
    }
    const page2 = await audit.list(null, q({ page: 2, limit: 10 }))
    expect(page2.total).toBe(25)
    expect(page2.items.map((e) => e.request_id)).toEqual([14, 13, 12, 11, 10, 9, 8, 7, 6, 5].map((i) => `req_${i}`))
    const byActor = await audit.list(null, q({ actor: 'usr_a', limit: 100 }))
    expect(byActor.total).toBe(13)
    expect(byActor.items.every((e) => e.actor.id === 'usr_a')).toBe(true)
    const combined = await audit.list(null, q({ actor: 'usr_admin', action: 'secret.created', target: 'sec_3' }))
    // i odd, i % 3 === 0, i % 5 === 3: i = 3 only... and 33 is past the end.
    expect(combined.items.map((e) => e.request_id)).toEqual(['req_3'])
    expect((await audit.list(null, q({ actor: 'system' }))).total).toBe(0)
  })

  it('bounds a time range by bisection: inclusive, exact totals, paged inside it; from after to is a 400', async () => {
    const { audit, clock } = setup()
    for (let i = 0; i < 60; i++) {
      clock.set(START + i * 60_000)
      await audit.record({ action: 'user.created', target: { type: 'user', id: `usr_${i}` } })
    }
    const at = (i: number) => new Date(START + i * 60_000).toISOString()
    const range = await audit.list(null, q({ from: at(10), to: at(19), limit: 4, page: 2 }))
    expect(range.total).toBe(10)
    expect(range.items.map((e) => e.target.id)).toEqual(['usr_15', 'usr_14', 'usr_13', 'usr_12'])
    expect((await audit.list(null, q({ from: at(10), to: at(19), limit: 4, page: 3 }))).items).toHaveLength(2)
    // By key: the same range walked from each page's `next`, ending inside `from` with no next.
    const ids: string[] = []
    let after: string | undefined
    for (let round = 0; round < 5; round++) {
      const page = await audit.list(null, { from: at(10), to: at(19), limit: 4, after })
      expect(page.total).toBe(10)
      ids.push(...page.items.map((e) => String(e.target.id)))
      if (page.next === null) break
      after = page.next
    }
    expect(ids).toEqual(Array.from({ length: 10 }, (_, i) => `usr_${19 - i}`))
    expect((await audit.list(null, q({ from: at(58) }))).items.map((e) => e.target.id)).toEqual(['usr_59', 'usr_58'])
    expect((await audit.list(null, q({ to: at(0) }))).items.map((e) => e.target.id)).toEqual(['usr_0'])
    expect((await audit.list(null, q({ from: '2027-01-01T00:00:00Z' }))).total).toBe(0)
    // Past year 9999 (an offset can push it there) is still after every entry.
    expect((await audit.list(null, q({ from: '9999-12-31T23:59:59-23:59' }))).total).toBe(0)
    // A timestamp with an offset means the same instant.
    expect((await audit.list(null, q({ from: '2026-01-01T01:00:00+01:00', to: at(1) }))).total).toBe(2)
    const refused = await audit.list(null, q({ from: at(5), to: at(4) })).catch((e: unknown) => e)
    expect(isApiError(refused) && refused.code).toBe('VALIDATION_FAILED')
  })

  it('sweeps entries older than the retention, with their per-user copies', async () => {
    const { audit, clock, store } = setup(30)
    await audit.record({ action: 'user.created', target: { type: 'user', id: 'usr_old' }, owner: 'usr_old' })
    clock.advance(20 * 86_400_000)
    await audit.record({ action: 'user.created', target: { type: 'user', id: 'usr_new' }, owner: 'usr_new' })
    clock.advance(11 * 86_400_000)
    expect(await audit.sweep()).toBe(1)
    expect((await audit.list(null, q())).items.map((e) => e.target.id)).toEqual(['usr_new'])
    expect((await audit.list('usr_old', q())).total).toBe(0)
    expect(await store.keys('audit-own:usr_old:')).toEqual([])
    expect((await audit.list('usr_new', q())).total).toBe(1)
    expect(await audit.sweep()).toBe(0)
  })

  it('failed authentication: one entry per address and minute, counted over instances', async () => {
    const clock = manualClock(START + 5_000)
    const store = countingStore()
    const hub = memoryHub({ clock })
    const logs = [1, 2].map(
      () => new AuditLog({ store, clock, logger: quietLogger, coordination: memoryCoordination({ hub }) }),
    )
    const [one, two] = logs as [AuditLog, AuditLog]
    for (let i = 0; i < 3; i++) one.authFailed('198.51.100.1')
    for (let i = 0; i < 2; i++) two.authFailed('198.51.100.1')
    two.authFailed('198.51.100.2')
    // At once: the entry's lock lets one writer in, the other keeps its count for its next flush.
    await Promise.all([one.flush(), two.flush()])
    one.authFailed('198.51.100.1')
    await one.flush()
    await two.flush()
    clock.advance(60_000)
    one.authFailed('198.51.100.1')
    await one.flush()
    const failed = (await one.list(null, q({ action: 'auth.failed' }))).items
    expect(failed.map((e) => [e.target.id, e.at, e.details?.count]).sort()).toEqual([
      ['198.51.100.1', '2026-01-01T00:00:00.000Z', 6],
      ['198.51.100.1', '2026-01-01T00:01:00.000Z', 1],
      ['198.51.100.2', '2026-01-01T00:00:00.000Z', 1],
    ])
    expect(failed.find((e) => e.details?.count === 6)).toMatchObject({
      actor: { type: 'anonymous', id: null },
      outcome: 'failure',
      source: '198.51.100.1',
    })
    expect((await one.list(null, q({ target: '198.51.100.1' }))).total).toBe(2)
  })

  it('integrations a connect flow creates or connects again are recorded for their owner', async () => {
    const { audit, clock, store } = setup()
    const notifier = { deliver: async () => ({ ok: true as const }) }
    const integrations = new IntegrationsService(
      store,
      clock,
      createAesGcmCipher(new Uint8Array(32)),
      notifier as never,
      new DeliveryLog(store),
      audit,
    )
    const at = new Date(clock.now()).toISOString()
    const record = await integrations.insert({
      id: 'int_flow1',
      owner_id: 'usr_a',
      type: 'messenger',
      config: {},
      enabled: true,
      is_default: false,
      scope: 'all',
      profile_ids: [],
      created_at: at,
      updated_at: at,
    })
    await integrations.reconnect('usr_a', record.id, (r) => ({ ...r, status: 'connected' }))
    const { items } = await audit.list('usr_a', q({ target: 'int_flow1' }))
    expect(items.map((e) => [e.action, e.actor.id, e.details?.type])).toEqual([
      ['integration.updated', 'usr_a', 'messenger'],
      ['integration.created', 'usr_a', 'messenger'],
    ])
  })
})
