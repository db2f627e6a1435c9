import { createStorage } from 'unstorage'
import { describe, expect, it } from 'vitest'
import { createAesGcmCipher, createServices, createTaskSocket, type Caller } from '@berth/core'
import { SLOW_CONSUMER_CLOSE } from '@berth/contract'
import { unstorageStore } from '../../server/src/store.js'

describe('task socket', () => {
  const services = createServices({ store: unstorageStore(createStorage()), cipher: createAesGcmCipher(new Uint8Array(32)) })
  const caller: Caller = { id: 'usr_socket', role: 'user' }

  it('closes a client that lets too much queue up, instead of buffering without end', async () => {
    let buffered = 0
    const sent: object[] = []
    const closed: [number, string][] = []
    const session = createTaskSocket({
      caller,
      services,
      maxBuffered: 1000,
      send: (m) => sent.push(m),
      buffered: () => buffered,
      close: (code, reason) => closed.push([code, reason]),
    })
    await session.message(JSON.stringify({ type: 'ping' }))
    expect(sent).toEqual([{ type: 'pong' }])
    buffered = 5000
    await session.message(JSON.stringify({ type: 'ping' }))
    expect(closed).toEqual([[SLOW_CONSUMER_CLOSE, expect.stringContaining('slow consumer')]])
    expect(sent).toHaveLength(1)
    // Nothing more is sent once closed.
    buffered = 0
    await session.message(JSON.stringify({ type: 'ping' }))
    expect(sent).toHaveLength(1)
  })
})
