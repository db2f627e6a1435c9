import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { createCoordination } from '@berth/server'
import { coordinationConformanceSuite, startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'

let redis: LocalRedis
beforeAll(async () => {
  redis = await startRedis()
})
afterAll(async () => {
  await redis?.stop()
})

// Several instances, each with its own connections, on one real redis-server; a key prefix
// per test, so each starts empty.
let n = 0
const LEASE_MS = 1000
coordinationConformanceSuite('redis', () => {
  const prefix = `t${++n}:`
  return {
    open: () => createCoordination({ driver: 'redis', url: redis.path, prefix, leaseMs: LEASE_MS }),
    leaseMs: LEASE_MS,
  }
})

describe('redis coordination', () => {
  it('keeps its keys under the prefix, so two deployments on one server do not meet', async () => {
    const a = await createCoordination({ driver: 'redis', url: redis.path, prefix: 'dep-a:' })
    const b = await createCoordination({ driver: 'redis', url: redis.path, prefix: 'dep-b:' })
    try {
      expect(await a.once.claimOnce('state_1', 60_000)).toBe(true)
      expect(await b.once.claimOnce('state_1', 60_000)).toBe(true)
      expect(await a.slots.acquire('prof_1', 1, 'ws_a', 60_000)).not.toBeNull()
      expect(await b.slots.acquire('prof_1', 1, 'ws_b', 60_000)).not.toBeNull()
      await a.queue('tasks').add({ id: 'task_1', owner: 'usr_1', payload: {} })
      expect(await b.queue('tasks').take()).toBeNull()
      expect(await b.instances.alive()).toEqual([b.instanceId])
      const client = redis.connect()
      const keys = await client.keys('*')
      await client.quit()
      expect(keys.length).toBeGreaterThan(0)
      for (const k of keys) expect(k).toMatch(/^(dep-[ab]|t\d+):/)
      expect(keys).toEqual(
        expect.arrayContaining([
          'dep-a:once:state_1',
          'dep-a:slot:prof_1',
          'dep-a:instances',
          'dep-a:q:tasks:prioritized',
        ]),
      )
    } finally {
      await a.close()
      await b.close()
    }
  })

  it('hands the job and slot of a SIGKILLed instance process to the survivors after the lease', async () => {
    const prefix = 'kill:'
    const survivor = await createCoordination({ driver: 'redis', url: redis.path, prefix, leaseMs: LEASE_MS })
    try {
      await survivor.queue('tasks').add({ id: 'task_1', owner: 'usr_1', payload: { n: 1 } })
      const worker = fileURLToPath(new URL('./fixtures/coordination-worker.ts', import.meta.url))
      const child = spawn(process.execPath, ['--import', 'tsx', worker, redis.path, prefix, String(LEASE_MS)], {
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      const [line] = (await once(createInterface({ input: child.stdout! }), 'line')) as [string]
      const said = JSON.parse(line) as { instance: string; job: string | null; slot: boolean }
      expect(said).toMatchObject({ job: 'task_1', slot: true })
      expect(await survivor.instances.alive()).toContain(said.instance)
      expect(await survivor.slots.acquire('prof_1', 1, 'ws_survivor', 60_000)).toBeNull()
      child.kill('SIGKILL')
      await once(child, 'exit')
      const taken = await vi.waitFor(async () => {
        const job = await survivor.queue('tasks').take()
        expect(job).not.toBeNull()
        return job
      }, 30_000)
      expect(taken).toMatchObject({ id: 'task_1', deliveries: 2, payload: { n: 1 } })
      expect(await survivor.instances.alive()).toEqual([survivor.instanceId])
      expect(await survivor.slots.acquire('prof_1', 1, 'ws_survivor', 60_000)).not.toBeNull()
    } finally {
      await survivor.close()
    }
  })

  it('refuses a second live instance with the same id, and an unknown driver', async () => {
    const a = await createCoordination({ driver: 'redis', url: redis.path, prefix: 'dup:', instanceId: 'inst_1' })
    try {
      await expect(
        createCoordination({ driver: 'redis', url: redis.path, prefix: 'dup:', instanceId: 'inst_1' }),
      ).rejects.toThrow(/already alive/)
    } finally {
      await a.close()
    }
    await expect(createCoordination({ driver: 'nope' } as never)).rejects.toThrow(/unknown driver/)
  })
})
