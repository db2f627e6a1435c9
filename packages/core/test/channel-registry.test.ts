/** The channel registry: one channel per type, wrapping, the fallback notifier, closing. */
import { describe, expect, it } from 'vitest'
import {
  createChannelRegistry,
  defineChannel,
  type Channel,
  type Notifier,
  type OutgoingNotification,
} from '../src/index.js'

const n: OutgoingNotification = {
  notification_id: 'notification_1',
  event: 'integration.test',
  payload: {},
  body: '{}',
  timestamp: 0,
  attempt: 1,
}
const target = (type: string) => ({ id: 'integration_1', owner_id: 'usr_1', type, config: { to: 'x' } })

/** A channel that records what it was called with. */
const recording = defineChannel(
  (o: { calls: unknown[][]; closed?: string[]; name?: string }): Channel => ({
    deliver: async (...args) => {
      o.calls.push(args)
      return { ok: true, status: 200 }
    },
    close: () => void o.closed?.push(o.name ?? '?'),
  }),
)

describe('createChannelRegistry', () => {
  it('delivers through the type’s channel with its config and the integration; other types fail untried', async () => {
    const calls: unknown[][] = []
    const reg = createChannelRegistry({ log: recording({ calls }) })
    expect(await reg.deliver(target('log'), n)).toEqual({ ok: true, status: 200 })
    expect(calls).toEqual([[{ to: 'x' }, n, { id: 'integration_1', owner_id: 'usr_1', type: 'log' }]])
    expect(await reg.deliver(target('pager'), n)).toEqual({
      ok: false,
      status: null,
      error: 'this server cannot deliver pager notifications',
      retryable: false,
    })
    expect(reg.types()).toEqual(['log'])
  })

  it('registers a type once; wrap builds around the current channel', async () => {
    const calls: unknown[][] = []
    const reg = createChannelRegistry({ log: recording({ calls }) })
    expect(() => reg.register('log', recording({ calls }))).toThrow(/registered already/)
    reg.wrap('log', (inner) => ({ deliver: (config, m, i) => inner.deliver({ ...config, wrapped: true }, m, i) }))
    await reg.deliver(target('log'), n)
    expect(calls[0]![0]).toEqual({ to: 'x', wrapped: true })
    // Wrapping a type without a channel wraps one that cannot deliver.
    reg.wrap('none', (inner) => inner)
    expect(await reg.deliver(target('none'), n)).toMatchObject({
      ok: false,
      error: 'this server cannot deliver none notifications',
    })
  })

  it('types without a channel go to the fallback notifier (checks too)', async () => {
    const seen: string[] = []
    const fallback: Notifier = {
      check: async (type) => [{ location: 'body', path: `config.${type}`, message: 'no' }],
      deliver: async (t) => {
        seen.push(`${t.type}:${t.id}:${String(t.config.to)}`)
        return { ok: true, status: 202 }
      },
    }
    const reg = createChannelRegistry({}, fallback)
    expect(await reg.deliver(target('pager'), n)).toEqual({ ok: true, status: 202 })
    expect(seen).toEqual(['pager:integration_1:x'])
    expect(await reg.check('pager', {})).toEqual([{ location: 'body', path: 'config.pager', message: 'no' }])
  })

  it('closes every channel it holds once, wrapped ones included', () => {
    const closed: string[] = []
    const reg = createChannelRegistry({ a: recording({ calls: [], closed, name: 'a' }) })
    reg.register('b', recording({ calls: [], closed, name: 'b' }))
    reg.wrap('a', (inner) => ({ deliver: inner.deliver }))
    reg.close()
    reg.close()
    expect(closed.sort()).toEqual(['a', 'b'])
  })
})
