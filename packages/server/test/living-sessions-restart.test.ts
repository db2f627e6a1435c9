/**
 * A server on Docker closed and started again on the same data dir while a session's agent
 * lives (issue 42): the close ends the agent and its background server (its exec would not
 * outlive the process), the next start adopts the warm container and shows no agent, and
 * the next follow-up resumes the conversation in a new agent. A workspace record a server
 * that died left with its agent is put right by the next start's recovery.
 */
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { SubmitTaskInput } from '@berth/client'
import { unstorageStore } from '@berth/server'
import { createStorage } from 'unstorage'
import fsDriver from 'unstorage/drivers/fs'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { expectNewAgent, followUp, probes, serving, startLiving, type LivingCase } from './living-sessions.helpers.js'
import { engineRuntime, sweep, tempDataDir, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { agentUser } from './tasks.helpers.js'

const { info, runtime } = engineRuntime('docker')
const dataDir = tempDataDir()
const pool = uniquePoolName('living-restart')
const storage = () => createStorage({ driver: fsDriver({ base: join(dataDir, 'store') }) })
let current: TestServer | undefined

/** A server on the data dir: its fs storage and pool survive a restart. */
async function start(): Promise<TestServer> {
  const s = await startServer({
    dataDir,
    storage: storage(),
    runtime,
    pool: { image: info.image, min: 0, max: 4, name: pool, spec: { network: 'none' } },
    runner: { bundleDir: RUNNER_BUNDLE },
  })
  await s.berth.ready
  current = s
  return s
}

/** Close the server as a restart does: its containers stay for the next start. */
async function stopKeeping(s: TestServer): Promise<void> {
  current = undefined
  s.server.closeAllConnections()
  await new Promise<void>((r) => s.server.close(() => r()))
  await s.berth.close()
}

/** Close the server for good: its containers go too. */
async function stopRemoving(s: TestServer): Promise<void> {
  current = undefined
  s.server.closeAllConnections()
  await new Promise<void>((r) => s.server.close(() => r()))
  await s.berth.close({ removeContainers: true })
}

/** The caller `first` made, on server `s` (same token, profile and key). */
function sameCaller(s: TestServer, first: LivingCase): LivingCase {
  const api = clientFor(s, first.token)
  const submit = (body: Partial<SubmitTaskInput> & { prompt: string }) =>
    api.tasks.submit({ body: { mode: 'batch', profile_id: first.profileId, ...body } })
  const waitDone = (taskId: string) => waitForTask(api, taskId, { timeout: 120_000 })
  return {
    ...first,
    s,
    api,
    submit,
    waitDone,
    run: async (body) => waitDone((await submit(body)).task_id),
    events: async (taskId) => (await api.tasks.events({ params: { id: taskId }, query: { limit: 100 } })).events,
  }
}

afterAll(async () => {
  await current?.berth.close({ removeContainers: true })
  current?.server.close()
  expect(await sweep(runtime, pool)).toBe(0)
  rmSync(dataDir, { recursive: true, force: true })
})

describe('a living session across a restart on docker', () => {
  it('the close ends the agent; after the start the workspace shows none and the follow-up resumes in a new one', async () => {
    const s1 = await start()
    const t1: LivingCase = { s: s1, runtime, pool, ...(await agentUser(s1, { waitMs: 120_000 })) }
    const l = await startLiving(t1)
    const before = await t1.api.workspaces.get({ params: { id: l.wsId } })
    expect(before.agent).toMatchObject({ tasks: 1 })
    await stopKeeping(s1)
    // The agent ended with the server, and its background server with it.
    await vi.waitFor(() => expect(serving(l)).toEqual([]), { timeout: 15_000, interval: 100 })

    const s2 = await start()
    const t2 = sameCaller(s2, t1)
    const after = await t2.api.workspaces.get({ params: { id: l.wsId } })
    expect(after).toMatchObject({ status: 'running', container_id: before.container_id, agent: null })
    const next = await followUp(t2, l, `Back? ${probes(l)} [[berth:recall_all]]`)
    await expectNewAgent(t2, l, next)
    expect((await t2.api.workspaces.get({ params: { id: l.wsId } })).agent).toMatchObject({ tasks: 1 })
    await stopRemoving(s2)
  }, 600_000)

  it('a workspace a dead server left with an agent shows none after the next start', async () => {
    const s1 = await start()
    const t1: LivingCase = { s: s1, runtime, pool, ...(await agentUser(s1, { waitMs: 120_000 })) }
    const l = await startLiving(t1)
    const left = await s1.berth.services.workspaces.records.get(t1.id, l.wsId)
    expect(left.agent).not.toBeNull()
    await stopKeeping(s1)
    // As a server that died would have left it: the record still names its agent.
    const store = unstorageStore(storage())
    await store.set(`workspaces:${t1.id}:${l.wsId}`, left)
    await store.close?.()

    const s2 = await start()
    const t2 = sameCaller(s2, t1)
    expect((await t2.api.workspaces.get({ params: { id: l.wsId } })).agent).toBeNull()
    await expectNewAgent(t2, l, await followUp(t2, l, `Back? ${probes(l)} [[berth:recall_all]]`))
    await stopRemoving(s2)
  }, 600_000)
})
