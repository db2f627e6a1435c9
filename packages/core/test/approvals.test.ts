/** Permission requests: stored per owner, listed by task, decided once, closed by the runner's timeout or the task's end. */
import { isApiError } from '@berth/contract'
import { describe, expect, it } from 'vitest'
import { memoryCoordination } from '../src/coordination/memory.js'
import { manualClock } from '../src/ports/clock.js'
import { Approvals } from '../src/tasks/approvals.js'
import { countingStore, taskRecord } from './task-fakes.js'

function setup() {
  const clock = manualClock(Date.parse('2026-01-01T00:00:00Z'))
  const approvals = new Approvals({ store: countingStore(), clock, once: memoryCoordination({ clock }).once })
  const task = taskRecord({ owner_id: 'usr_a', status: 'running' })
  const request = (id: string) => ({
    type: 'permission_request' as const,
    request_id: id,
    tool: 'Bash',
    input: { command: 'ls' },
  })
  return { clock, approvals, task, request }
}

/** The error code a call is refused with. */
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e: unknown) => (isApiError(e) ? e.code : String(e)),
  )

describe('approvals', () => {
  it('lists the pending requests of a task, oldest first, with their expiry', async () => {
    const { approvals, task, request, clock } = setup()
    await approvals.open(task, request('apr_1'), 60)
    clock.advance(1000)
    await approvals.open(task, request('apr_2'), 60)
    await approvals.open(taskRecord({ owner_id: 'usr_a' }), request('apr_other_task'), 60)
    const pending = await approvals.pending('usr_a', task.id)
    expect(pending.map((a) => a.request_id)).toEqual(['apr_1', 'apr_2'])
    expect(pending[0]).toMatchObject({ status: 'pending', expires_at: '2026-01-01T00:01:00.000Z', decided_at: null })
    expect(await approvals.pending('usr_b', task.id)).toEqual([])
  })

  it('a request whose id is not an approval id is not stored', async () => {
    const { approvals, task, request } = setup()
    expect(await approvals.open(task, request('../../etc'), 60)).toBeNull()
    expect(await approvals.pending('usr_a', task.id)).toEqual([])
  })

  it('decides once: a second decision is a conflict, another owner or task a 404', async () => {
    const { approvals, task, request } = setup()
    await approvals.open(task, request('apr_1'), 60)
    expect(await refusal(approvals.claim('usr_b', task.id, 'apr_1', { decision: 'allow' }))).toBe('NOT_FOUND')
    expect(await refusal(approvals.claim('usr_a', 'task_other', 'apr_1', { decision: 'allow' }))).toBe('NOT_FOUND')
    const decided = await approvals.claim('usr_a', task.id, 'apr_1', { decision: 'deny', message: 'no' })
    expect(decided).toMatchObject({ status: 'denied', message: 'no' })
    expect(await refusal(approvals.claim('usr_a', task.id, 'apr_1', { decision: 'allow' }))).toBe('CONFLICT')
    expect(await approvals.pending('usr_a', task.id)).toEqual([])
  })

  it('two decisions at once: exactly one wins', async () => {
    const { approvals, task, request } = setup()
    await approvals.open(task, request('apr_1'), 60)
    const outcomes = await Promise.all(
      (['allow', 'deny'] as const).map((decision) => refusal(approvals.claim('usr_a', task.id, 'apr_1', { decision }))),
    )
    expect(outcomes.sort()).toEqual(['CONFLICT', null])
  })

  it('after its expiry, or once the runner denied it at its timeout, a request cannot be decided', async () => {
    const { approvals, task, request, clock } = setup()
    await approvals.open(task, request('apr_1'), 60)
    await approvals.open(task, request('apr_2'), 600)
    clock.advance(60_000)
    expect(await refusal(approvals.claim('usr_a', task.id, 'apr_1', { decision: 'allow' }))).toBe('CONFLICT')
    await approvals.closed('usr_a', {
      type: 'permission_decision',
      request_id: 'apr_2',
      decision: 'deny',
      message: 'timed out',
      by: 'timeout',
    })
    expect(await refusal(approvals.claim('usr_a', task.id, 'apr_2', { decision: 'allow' }))).toBe('CONFLICT')
    expect((await approvals.records.get('usr_a', 'apr_2')).status).toBe('expired')
  })

  it("the task's end cancels what is still pending", async () => {
    const { approvals, task, request } = setup()
    await approvals.open(task, request('apr_1'), 60)
    await approvals.open(task, request('apr_2'), 60)
    await approvals.claim('usr_a', task.id, 'apr_1', { decision: 'allow' })
    await approvals.cancelPending(task)
    expect((await approvals.records.get('usr_a', 'apr_1')).status).toBe('allowed')
    expect((await approvals.records.get('usr_a', 'apr_2')).status).toBe('cancelled')
    expect(await refusal(approvals.claim('usr_a', task.id, 'apr_2', { decision: 'allow' }))).toBe('CONFLICT')
  })
})
