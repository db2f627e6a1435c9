import { mkdtempSync, rmSync } from 'node:fs'
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { IDLE_COMMAND, isContainerError } from '@berth/core'
import { readEngine } from '@berth/testkit'
import { dockerRuntime } from '../src/index.js'

const engine = readEngine('docker')
const dir = mkdtempSync(join(tmpdir(), 'berth-engine-loss-'))

/** A unix-socket proxy in front of the engine that can "lose" it: close everything at once. */
function engineProxy(): { socketPath: string; cut: () => void; server: Server } {
  const socketPath = join(dir, 'proxy.sock')
  const open = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = createConnection(engine.socketPath)
    open.add(client).add(upstream)
    client.pipe(upstream).pipe(client)
    const drop = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
  })
  server.listen(socketPath)
  return {
    socketPath,
    server,
    cut: () => {
      server.close()
      for (const s of open) s.destroy()
    },
  }
}

afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('engine lost mid-exec', () => {
  it('rejects the running exec with CONTAINER_FAILED instead of hanging', async () => {
    const direct = dockerRuntime({ socketPath: engine.socketPath })
    const proxy = engineProxy()
    await new Promise((r) => proxy.server.once('listening', r))
    const viaProxy = dockerRuntime({ socketPath: proxy.socketPath, watchIntervalMs: 200 })
    const { id } = await direct.create({
      image: engine.image,
      cmd: [...IDLE_COMMAND],
      labels: { 'berth.test': 'engine-loss' },
    })
    try {
      await direct.start(id)
      const proc = await viaProxy.exec(id, { cmd: ['sh', '-c', 'echo up; sleep 60'] })
      for await (const c of proc.stdout) if (Buffer.from(c).toString().includes('up')) break
      const t0 = Date.now()
      proxy.cut()
      const err = await proc.exit.then(
        () => null,
        (e: unknown) => e,
      )
      expect(isContainerError(err)).toBe(true)
      expect(['unreachable', 'died']).toContain((err as { details: { reason: string } }).details.reason)
      expect(Date.now() - t0).toBeLessThan(5000)
    } finally {
      await direct.remove(id)
    }
  })
})
