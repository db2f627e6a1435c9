import type { Coordination, DueJob, TakenJob } from '@berth/core'
import { afterEach, describe, expect, it } from 'vitest'
import { waitUntil } from './wait.js'

/** One backend a test works on: empty, shared by every instance opened on it. */
export interface CoordinationUnderTest {
  /** Open one more instance on the shared backend (its own connections, for a server). */
  open(): Coordination | Promise<Coordination>
  /** The job lease the instances are opened with (ms): a dead instance's jobs return after it. */
  leaseMs: number
  /** Remove what the backend left behind. */
  cleanup?(): Promise<void>
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * The conformance suite every coordination driver passes (unstorage-style: pass a factory).
 * Each case opens several instances on one backend and checks that they behave as one:
 * exact slot and rate limits over all of them, one winner per single-use key, pub/sub across
 * instances once and in order, queue order (priority, owner fairness, FIFO), a dead worker's
 * job taken over after its lease, and a delayed job run once.
 *
 * @example
 * ```ts
 * const hub = memoryHub()
 * coordinationConformanceSuite('memory', () => ({ open: () => memoryCoordination({ hub, leaseMs: 300 }), leaseMs: 300 }))
 * ```
 */
export function coordinationConformanceSuite(
  name: string,
  setup: () => CoordinationUnderTest | Promise<CoordinationUnderTest>,
): void {
  describe(`Coordination conformance: ${name}`, () => {
    let backend: CoordinationUnderTest | null = null
    let opened: Coordination[] = []
    const instances = async (n: number) => {
      backend ??= await setup()
      const made: Coordination[] = []
      for (let i = 0; i < n; i++) made.push(await backend.open())
      opened.push(...made)
      return made
    }
    afterEach(async () => {
      for (const c of opened) await c.close()
      await backend?.cleanup?.()
      opened = []
      backend = null
    })

    it('admits exactly `limit` of 20 parallel slot acquires spread over instances, and frees a lapsed lease', async () => {
      const all = await instances(3)
      const leases = await Promise.all(
        Array.from({ length: 20 }, (_, i) => all[i % 3]!.slots.acquire('prof_1', 5, `ws_${i}`, 60_000)),
      )
      const won = leases.filter((l) => l !== null)
      expect(won).toHaveLength(5)
      for (const c of all) expect(await c.slots.count('prof_1')).toBe(5)
      expect((await all[1]!.slots.holders('prof_1')).sort()).toEqual(won.map((l) => l.holder).sort())
      // A holder that has a slot gets it again; nobody else does while 5 are held.
      expect(await all[2]!.slots.acquire('prof_1', 5, won[0]!.holder, 60_000)).not.toBeNull()
      expect(await all[2]!.slots.acquire('prof_1', 5, 'ws_late', 60_000)).toBeNull()
      await all[0]!.slots.release(won[0]!)
      expect(await all[1]!.slots.renew(won[0]!, 60_000)).toBeNull()
      expect(await all[2]!.slots.acquire('prof_1', 5, 'ws_late', 60_000)).not.toBeNull()
      expect(await all[0]!.slots.count('prof_1')).toBe(5)
      expect(await all[0]!.slots.count('prof_2')).toBe(0)
      // A holder that never releases (it died) stops counting after its ttl.
      const short = await all[0]!.slots.acquire('prof_3', 1, 'ws_dead', 1000)
      expect(short).not.toBeNull()
      expect(await all[1]!.slots.acquire('prof_3', 1, 'ws_next', 60_000)).toBeNull()
      await waitUntil(() => all[1]!.slots.acquire('prof_3', 1, 'ws_next', 60_000), {
        what: 'a lapsed slot lease frees its slot',
      })
      const renewed = await all[2]!.slots.renew(won[1]!, 120_000)
      expect(renewed?.expiresAt).toBeGreaterThan(won[1]!.expiresAt)
    })

    it('refuses exactly one of 11 rapid takes with burst 10 spread over instances, with the RateLimit numbers', async () => {
      const all = await instances(3)
      const settings = { rpm: 6, burst: 10 } // one token per 10 s: no refill during the burst
      const decisions = await Promise.all(
        Array.from({ length: 11 }, (_, i) => all[i % 3]!.rates.take('usr_1', settings)),
      )
      const refused = decisions.filter((d) => !d.allowed)
      expect(refused).toHaveLength(1)
      expect(
        decisions
          .filter((d) => d.allowed)
          .map((d) => d.remaining)
          .sort((a, b) => a - b),
      ).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
      expect(refused[0]).toMatchObject({ limit: 10, remaining: 0, policy: '10;w=100;burst=10;rpm=6' })
      expect(refused[0]!.retryAfterSeconds).toBeGreaterThanOrEqual(1)
      expect(refused[0]!.retryAfterSeconds).toBeLessThanOrEqual(10)
      expect(refused[0]!.resetSeconds).toBeGreaterThan(90)
      const other = await all[0]!.rates.take('usr_2', settings)
      expect(other).toMatchObject({ allowed: true, remaining: 9, retryAfterSeconds: 0 })
    })

    it('gives a single-use key to exactly one caller across instances, until it lapses or is deleted', async () => {
      const all = await instances(3)
      const claims = await Promise.all(
        Array.from({ length: 12 }, (_, i) => all[i % 3]!.once.claimOnce('oauth:abc', 60_000)),
      )
      expect(claims.filter(Boolean)).toHaveLength(1)
      const sets = await Promise.all(
        Array.from({ length: 12 }, (_, i) => all[i % 3]!.once.setIfAbsent('req:usr_1:r1', `task_${i}`, 60_000)),
      )
      const stored = sets.map((v, i) => (v === null ? `task_${i}` : null)).filter((v) => v !== null)
      expect(stored).toHaveLength(1)
      for (const v of sets) if (v !== null) expect(v).toBe(stored[0])
      expect(await all[2]!.once.get('req:usr_1:r1')).toBe(stored[0])
      expect(await all[2]!.once.get('req:usr_1:none')).toBeNull()
      await all[1]!.once.delete('oauth:abc')
      expect(await all[2]!.once.claimOnce('oauth:abc', 60_000)).toBe(true)
      expect(await all[0]!.once.claimOnce('nonce:short', 1000)).toBe(true)
      expect(await all[1]!.once.claimOnce('nonce:short', 1000)).toBe(false)
      await waitUntil(() => all[1]!.once.claimOnce('nonce:short', 60_000), {
        what: 'a single-use key lapses after its ttl',
      })
    })

    it('delivers messages published on one instance to subscribers on others, once each and in order', async () => {
      const [a, b, c] = await instances(3)
      const onA: unknown[] = []
      const onC: unknown[] = []
      const stopA = await a!.pubsub.subscribe('task:1', (m) => onA.push(m))
      const keptA: unknown[] = []
      await a!.pubsub.subscribe('task:1', (m) => keptA.push(m))
      await c!.pubsub.subscribe('task:1', (m) => onC.push(m))
      await a!.pubsub.subscribe('task:2', (m) => onA.push(m))
      const sent = Array.from({ length: 50 }, (_, i) => ({ seq: i, text: `event ${i}` }))
      await Promise.all(sent.map((m) => b!.pubsub.publish('task:1', m)))
      await b!.pubsub.publish('task:1', 'end')
      await waitUntil(async () => onA.includes('end') && onC.includes('end'), {
        what: 'both subscribers see the last message',
      })
      expect(onA).toEqual([...sent, 'end'])
      expect(onC).toEqual([...sent, 'end'])
      await stopA()
      await c!.pubsub.publish('task:1', 'after')
      await waitUntil(async () => keptA.includes('after'), { what: 'the other subscriber on A sees the next message' })
      expect(onA).toEqual([...sent, 'end'])
      expect(keptA).toEqual([...sent, 'end', 'after'])
    })

    it('takes jobs by priority, owners in turn, then in order of adding', async () => {
      const [a, b] = await instances(2)
      const q = a!.queue<{ n: number }>('tasks')
      // Added lowest first, by four owners (no fairness at play): priority decides.
      for (const [i, [id, priority]] of (
        [
          ['low_1', 'low'],
          ['normal_1', 'normal'],
          ['high_1', 'high'],
          ['normal_2', 'normal'],
        ] as const
      ).entries()) {
        expect(await q.add({ id, owner: `usr_${i}`, priority, payload: { n: 1 } })).toBe(true)
      }
      expect(await q.add({ id: 'normal_1', owner: 'usr_1', payload: { n: 2 } })).toBe(false)
      // usr_a's 2nd and 3rd jobs wait behind usr_b's 1st, added later at the same priority.
      for (const id of ['a_1', 'a_2', 'a_3']) await q.add({ id, owner: 'usr_a', priority: 'low', payload: { n: 3 } })
      await q.add({ id: 'b_1', owner: 'usr_b', priority: 'low', payload: { n: 4 } })
      expect(await b!.queue('tasks').counts()).toEqual({ waiting: 8, active: 0, delayed: 0 })
      const order: string[] = []
      for (let i = 0; i < 8; i++) {
        const job = await (i % 2 ? b! : a!).queue<{ n: number }>('tasks').take()
        order.push(job!.id)
        if (job!.id === 'normal_1')
          expect(job).toMatchObject({ owner: 'usr_1', priority: 'normal', payload: { n: 1 }, deliveries: 1 })
      }
      expect(order).toEqual(['high_1', 'normal_1', 'normal_2', 'low_1', 'a_1', 'b_1', 'a_2', 'a_3'])
      expect(await q.take()).toBeNull()
      expect(await q.counts()).toEqual({ waiting: 0, active: 8, delayed: 0 })
    })

    it('acks, fails, retries and cancels jobs', async () => {
      const [a, b] = await instances(2)
      const qa = a!.queue('jobs')
      const qb = b!.queue('jobs')
      for (const id of ['j_1', 'j_2', 'j_3', 'j_4']) await qa.add({ id, owner: `usr_${id}`, payload: { id } })
      const j1 = (await qa.take())!
      expect(await qb.ack(j1)).toBe(false) // not B's lease
      expect(await qa.ack(j1)).toBe(true)
      expect(await qa.ack(j1)).toBe(false)
      const j2 = (await qb.take())!
      expect(j2.id).toBe('j_2')
      expect(await qb.fail(j2, { retryInMs: 0 })).toBe(true) // back, keeping its turn
      expect(await qb.cancel('j_3')).toBe(true)
      expect(await qb.cancel('j_3')).toBe(false)
      const again = (await qa.take())!
      expect(again).toMatchObject({ id: 'j_2', deliveries: 2, payload: { id: 'j_2' } })
      expect(await qa.cancel('j_2')).toBe(false) // being worked on
      expect(await qa.fail(again, { retryInMs: 1000 })).toBe(true)
      const j4 = (await qb.take())!
      expect(j4.id).toBe('j_4')
      expect(await qb.fail(j4)).toBe(true) // dropped
      expect(await qa.counts()).toEqual({ waiting: 0, active: 0, delayed: 1 })
      const third = await waitUntil(() => qa.take(), { what: 'a delayed retry becomes ready' })
      expect(third).toMatchObject({ id: 'j_2', deliveries: 3 })
      expect(await qa.ack(third)).toBe(true)
      expect(await qa.counts()).toEqual({ waiting: 0, active: 0, delayed: 0 })
      // An acked id may be added again.
      expect(await qb.add({ id: 'j_1', owner: 'usr_1', payload: {} })).toBe(true)
    })

    it('hands a job whose worker instance died to another worker after its lease, not before', async () => {
      const [a, b] = await instances(2)
      const leaseMs = backend!.leaseMs
      await a!.queue('tasks').add({ id: 'task_1', owner: 'usr_1', payload: { p: 1 } })
      const held = (await a!.queue('tasks').take()) as TakenJob
      expect(held.deliveries).toBe(1)
      // While A lives it renews its lease: B gets nothing, even after several leases.
      await sleep(leaseMs * 3)
      expect(await b!.queue('tasks').take()).toBeNull()
      expect(await b!.instances.alive()).toEqual(expect.arrayContaining([a!.instanceId, b!.instanceId]))
      await a!.close() // dies holding the job: no ack
      expect(await b!.instances.alive()).not.toContain(a!.instanceId)
      const taken = await waitUntil(() => b!.queue('tasks').take(), {
        what: "the dead worker's job is taken by another",
      })
      expect(taken).toMatchObject({ id: 'task_1', owner: 'usr_1', payload: { p: 1 }, deliveries: 2 })
      expect(await b!.queue('tasks').ack(taken)).toBe(true)
    })

    it('runs a delayed job once across the instances processing its queue, and not a cancelled one', async () => {
      const all = await instances(3)
      const ran: DueJob[] = []
      for (const c of all) await c.delayed.process('hooks', async (job) => void ran.push(job))
      // Far enough ahead that the second schedule and the cancel meet pending jobs.
      const at = Date.now() + 1000
      await all[0]!.delayed.schedule('hooks', 'dlv_1', at, { attempt: 2 })
      await all[1]!.delayed.schedule('hooks', 'dlv_1', at, { attempt: 3 }) // a second schedule is ignored
      await all[2]!.delayed.schedule('hooks', 'dlv_2', at + 60_000, {})
      expect(await all[1]!.delayed.cancel('hooks', 'dlv_2')).toBe(true)
      expect(await all[1]!.delayed.cancel('hooks', 'dlv_2')).toBe(false)
      await all[2]!.delayed.schedule('hooks', 'dlv_3', at + 200, { last: true })
      await waitUntil(async () => ran.some((j) => j.id === 'dlv_3'), { what: 'the later delayed job runs' })
      expect(ran.map((j) => j.id).sort()).toEqual(['dlv_1', 'dlv_3'])
      expect(ran.find((j) => j.id === 'dlv_1')).toMatchObject({ queue: 'hooks', payload: { attempt: 2 } })
      // Done: the id may be scheduled again.
      await all[0]!.delayed.schedule('hooks', 'dlv_1', Date.now(), { attempt: 4 })
      await waitUntil(async () => ran.length === 3, { what: 'a rescheduled id runs again' })
      expect(ran[2]).toMatchObject({ id: 'dlv_1', payload: { attempt: 4 } })
    })

    it('lists live instances and drops a closed one', async () => {
      const [a, b, c] = await instances(3)
      expect(new Set([a!.instanceId, b!.instanceId, c!.instanceId]).size).toBe(3)
      for (const x of [a!, b!, c!])
        expect((await x.instances.alive()).sort()).toEqual([a!.instanceId, b!.instanceId, c!.instanceId].sort())
      await b!.close()
      expect((await a!.instances.alive()).sort()).toEqual([a!.instanceId, c!.instanceId].sort())
    })
  })
}
