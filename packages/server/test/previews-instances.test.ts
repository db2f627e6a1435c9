/**
 * Previews across instances: two standalone servers on one Redis, A on Docker and B on
 * Podman (so B cannot reach A's container by itself). A session runs on one of them; a
 * preview created, fetched and opened as a WebSocket through the other reaches the
 * container through its holder's advertised `BERTH_INSTANCE_URL`; revoked on the holder,
 * it is 404 on both.
 */
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { startRedis, type LocalRedis } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { clientFor } from './helpers.js'
import { ENDED, pollTask, startInstance, userWithProfile, type Instance } from './multi-instance.helpers.js'
import { engineRuntime, sweep } from './pool.helpers.js'
import { echoOverWebSocket, serveInContainer } from './previews.helpers.js'
import { freePort } from './standalone.helpers.js'

let redis: LocalRedis
const started: Instance[] = []

beforeAll(async () => {
  redis = await startRedis()
  const shared = {
    BERTH_REDIS_URL: redis.path,
    BERTH_REDIS_PREFIX: `pv-${randomBytes(4).toString('hex')}:`,
    BERTH_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
  }
  const tag = randomBytes(3).toString('hex')
  const start = async (id: string, engine: 'docker' | 'podman') => {
    const port = await freePort()
    const settings = { ...shared, BERTH_INSTANCE_URL: `http://127.0.0.1:${port}` }
    return startInstance({ id: `pv-${id}-${tag}`, engine, port, settings })
  }
  started.push(...(await Promise.all([start('a', 'docker'), start('b', 'podman')])))
}, 300_000)

afterAll(async () => {
  await Promise.all(started.map((i) => i.stop()))
  for (const i of started) await sweep(engineRuntime(i.engine).runtime, i.pool)
  for (const i of started) rmSync(i.dataDir, { recursive: true, force: true })
  await redis?.stop()
}, 120_000)

describe('previews across two instances on one Redis', () => {
  it('a preview opened through the instance without the container reaches it through the holder', async () => {
    const [a, b] = started as [Instance, Instance]
    const { token, profileId } = await userWithProfile(a.url, 'Previewer')
    const viaA = clientFor(a, token)
    const sub = await viaA.tasks.submit({
      body: { mode: 'session', profile_id: profileId, prompt: serveInContainer(8000) },
    })
    const done = await pollTask(viaA, sub.task_id, (t) => ENDED.includes(t.status), 120_000)
    expect(done.status, JSON.stringify(done.error)).toBe('completed')
    expect(JSON.stringify(done.result?.tool_calls)).toContain('started')
    // The holder is whichever instance ran the task: the preview goes through the other one.
    const [holder, other] = (await onPool(a, token, sub.workspace_id!)) ? [a, b] : [b, a]
    expect(await onPool(holder, token, sub.workspace_id!)).toBe(true)
    expect(await onPool(other, token, sub.workspace_id!)).toBe(false)
    const api = clientFor(other, token)
    const p = await api.workspaces.previews.create({ params: { id: sub.workspace_id! }, body: { port: 8000 } })
    expect(p.url.startsWith(`${other.url}/preview/`)).toBe(true)
    const res = await fetch(`${p.url}page?q=1`)
    expect(await res.text()).toBe('hello GET /page?q=1 auth= body=')
    expect(await echoOverWebSocket(`${p.url.replace(/^http/, 'ws')}ws`, 'across')).toBe('echo:across')
    expect((await clientFor(holder, token).workspaces.previews.list({ params: { id: sub.workspace_id! } })).total).toBe(
      1,
    )
    await clientFor(holder, token).workspaces.previews.revoke({ params: { id: sub.workspace_id!, preview_id: p.id } })
    expect((await fetch(p.url)).status).toBe(404)
    expect((await fetch(p.url.replace(other.url, holder.url))).status).toBe(404)
  }, 240_000)
})

/** Whether the instance's own pool holds the workspace's container (a caller sees the containers working for it). */
async function onPool(i: Instance, token: string, wsId: string): Promise<boolean> {
  const { containers } = await clientFor(i, token).pool.containers.list({ query: { limit: 100 } })
  return containers.some((c) => c.workspace_id === wsId)
}
