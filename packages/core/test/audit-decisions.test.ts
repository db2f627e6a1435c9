/**
 * What the audit log records beyond plain changes: approval decisions with the input that
 * runs and the ones that lost a race, cancels and interrupts (the first, then the late),
 * and refusals counted per minute: ids a caller does not have, egress refused per task.
 */
import { notFound, type AuditQuery } from '@berth/contract'
import { describe, expect, it } from 'vitest'
import { AuditLog } from '../src/audit/log.js'
import { memoryCoordination } from '../src/coordination/memory.js'
import { manualClock } from '../src/ports/clock.js'
import { OwnedCollection } from '../src/records/collection.js'
import { Approvals } from '../src/tasks/approvals.js'
import { TaskSteering } from '../src/tasks/steer.js'
import type { TaskRecord } from '../src/tasks/task.js'
import { countingStore, quietLogger, taskRecord } from './task-fakes.js'

const START = Date.parse('2026-01-01T00:00:00Z')
const q = (query: Partial<AuditQuery> = {}): AuditQuery => ({ page: 1, limit: 100, ...query })
const user = { id: 'usr_a', role: 'user' as const }

function setup() {
  const clock = manualClock(START)
  const store = countingStore()
  const coordination = memoryCoordination({ clock })
  const audit = new AuditLog({ store, clock, logger: quietLogger, coordination })
  const approvals = new Approvals({ store, clock, once: coordination.once })
  const records = new OwnedCollection<TaskRecord>(store, 'tasks', 'task')
  // A runner that takes every control line; nothing queued or running here to cancel.
  const steer = new TaskSteering({
    instanceId: 'inst_1',
    records,
    approvals,
    local: { here: async () => true } as never,
    cancels: { ended: async (t: TaskRecord) => t, endOf: () => ({ ended: new Promise(() => {}), stop() {} }) } as never,
    scheduler: { dequeue: () => false },
    dispatch: { cancel: async () => false, requestControl: async () => {} },
    once: coordination.once,
    audit,
  })
  return { clock, store, audit, approvals, records, steer }
}

describe('decisions in the audit log', () => {
  it('an approval allowed with a replaced input: the record and the entry show the input that runs; the late decision is a failure', async () => {
    const { audit, approvals, records, steer } = setup()
    const task = await records.put(taskRecord({ owner_id: 'usr_a', status: 'running' }))
    const request = { type: 'permission_request' as const, request_id: 'apr_1', tool: 'Bash', input: { command: 'ls' } }
    await approvals.open(task, request, 60)
    const decided = await steer.decide('usr_a', task.id, 'apr_1', { decision: 'allow', input: { command: 'ls -la' } })
    expect(decided).toMatchObject({
      status: 'allowed',
      input: { command: 'ls -la' },
      original_input: { command: 'ls' },
    })
    const late = await steer.decide('usr_a', task.id, 'apr_1', { decision: 'deny' }).catch((e: unknown) => e)
    expect(late).toMatchObject({ code: 'CONFLICT' })
    const { items } = await audit.list('usr_a', q({ action: 'approval.decided' }))
    expect(items.map((e) => [e.outcome, e.details])).toEqual([
      ['failure', { task_id: task.id, decision: 'deny', error: 'Approval request apr_1 is already allowed' }],
      [
        'success',
        {
          task_id: task.id,
          decision: 'allow',
          tool: 'Bash',
          input: '{"command":"ls -la"}',
          original_input: '{"command":"ls"}',
        },
      ],
    ])
    expect(items.every((e) => e.actor.id === 'usr_a' && e.target.id === 'apr_1')).toBe(true)
  })

  it('the first cancel or interrupt of a task succeeds; the ones after it, or after its end, are failures', async () => {
    const { audit, records, steer } = setup()
    const running = await records.put(taskRecord({ owner_id: 'usr_a', status: 'running' }))
    await Promise.all([
      steer.recordStop('task.cancelled', running),
      steer.recordStop('task.cancelled', running),
      steer.recordStop('task.interrupted', running),
    ])
    const ended = await records.put(taskRecord({ owner_id: 'usr_a', status: 'cancelled' }))
    await steer.interrupt('usr_a', ended.id)
    const stops = (id: string) =>
      audit
        .list('usr_a', q({ target: id }))
        .then(({ items }) => items.map((e) => [e.action, e.outcome, e.details?.error ?? null]).sort())
    expect(await stops(running.id)).toEqual([
      ['task.cancelled', 'failure', 'another cancel or interrupt came first'],
      ['task.cancelled', 'success', null],
      ['task.interrupted', 'failure', 'another cancel or interrupt came first'],
    ])
    expect(await stops(ended.id)).toEqual([['task.interrupted', 'failure', 'the task had ended (cancelled)']])
  })
})

describe('refusals counted per minute', () => {
  it('ids a caller does not have: one entry per caller, kind, route and minute with a count; other errors are not counted', async () => {
    const { audit, clock } = setup()
    for (let i = 0; i < 50; i++) audit.denied(user, 'tasks.get', notFound('task', `task_guess${i}`))
    audit.denied(user, 'ws.subscribe', notFound('task', 'task_other'))
    audit.denied(user, 'workspaces.get', notFound('workspace', 'ws_other'))
    audit.denied(user, 'tasks.get', new Error('boom'))
    audit.denied(user, 'metrics', { code: 'NOT_FOUND', name: 'ApiError', message: 'Metrics are off' })
    await audit.flush()
    clock.advance(60_000)
    audit.denied(user, 'ws.subscribe', notFound('task', 'task_later'))
    await audit.flush()
    const { items } = await audit.list(null, q({ action: 'access.denied' }))
    // Entries of one minute share its time: sorted by time, then kind.
    expect(
      items.map((e) => [e.at, e.target, e.details]).sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y))),
    ).toEqual([
      ['2026-01-01T00:00:00.000Z', { type: 'task', id: 'task_guess0' }, { where: 'tasks.get', count: 50 }],
      ['2026-01-01T00:00:00.000Z', { type: 'task', id: 'task_other' }, { where: 'ws.subscribe', count: 1 }],
      ['2026-01-01T00:00:00.000Z', { type: 'workspace', id: 'ws_other' }, { where: 'workspaces.get', count: 1 }],
      ['2026-01-01T00:01:00.000Z', { type: 'task', id: 'task_later' }, { where: 'ws.subscribe', count: 1 }],
    ])
    expect(items.every((e) => e.outcome === 'failure' && e.actor.id === 'usr_a')).toBe(true)
    // The caller sees its own: only what it sent.
    expect((await audit.list('usr_a', q({ action: 'access.denied' }))).total).toBe(4)
  })

  it('egress refused: one entry per task, host, reason and minute; a task spraying hosts makes at most 21', async () => {
    const { audit } = setup()
    const refusal = (host: string, task_id = 'task_spray') => ({
      task_id,
      owner_id: 'usr_a',
      host,
      port: 443,
      status: 403,
      code: 'not_allowlisted',
      reason: `${host}:443 is not in this task's allowlist`,
    })
    for (let i = 0; i < 40; i++) audit.egressRefused(refusal('denied.example'))
    for (let i = 0; i < 500; i++) audit.egressRefused(refusal(`h${i}.example`))
    audit.egressRefused(refusal('denied.example', 'task_quiet'))
    await audit.flush()
    const spray = await audit.list('usr_a', q({ action: 'egress.refused', limit: 100 }))
    const ofSpray = spray.items.filter((e) => e.details?.task_id === 'task_spray')
    expect(ofSpray).toHaveLength(21)
    const count = (host: string) => ofSpray.find((e) => e.target.id === host)?.details?.count
    expect(count('denied.example')).toBe(40)
    // 19 more hosts have their own entry; the other 481 are counted under `*`.
    expect(count('*')).toBe(481)
    expect(ofSpray.reduce((sum, e) => sum + Number(e.details?.count), 0)).toBe(540)
    expect(spray.items.find((e) => e.details?.task_id === 'task_quiet')).toMatchObject({
      actor: { type: 'system', id: null },
      target: { type: 'host', id: 'denied.example' },
      outcome: 'failure',
      details: { reason: 'not_allowlisted', status: 403, port: 443, count: 1 },
    })
  })
})
