/** examples/client-usage: the walk-through runs a real stub task against a real server on Docker. */
import { ensureEngines } from '@berth/testkit'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createBerthClient } from '@berth/client/node'
import { startServer, type TestServer } from '../../server/test/helpers.js'
import { engineRuntime, sweep, uniquePoolName } from '../../server/test/pool.helpers.js'
import setupRunner, { RUNNER_BUNDLE } from '../../server/test/runner.global-setup.js'
import { demo } from '../../../examples/client-usage/src/demo.js'

let s: TestServer
const pool = uniquePoolName('client-usage')
const { info, runtime } = (() => {
  ensureEngines(['docker'])
  return engineRuntime('docker')
})()
beforeAll(async () => {
  await setupRunner()
  s = await startServer({
    runtime,
    pool: { image: info.image, min: 1, max: 4, name: pool, spec: { network: 'none' } },
    runner: { bundleDir: RUNNER_BUNDLE },
  })
  await s.berth.ready
})
afterAll(async () => {
  await s.close()
  expect(await sweep(runtime, pool)).toBe(0)
})

it('creates a stub credential and a profile, streams a real task and a session, cleans up', async () => {
  const berth = createBerthClient({ baseURL: s.url, token: (await s.user()).token })
  let out = ''
  const { task, recall } = await demo(berth, (text) => (out += text))
  expect(task.status).toBe('completed')
  expect(task.result!.tool_calls.map((c) => c.name)).toEqual(['Bash'])
  // The streamed text, the tool call and its output were written as they happened.
  expect(out).toContain('> Bash {"command":"uname -s"}')
  expect(out).toContain('< Linux')
  expect(out).toContain('The workspace runs Linux.')
  expect(recall.result!.text).toContain('The first prompt was: My favourite colour is teal.')
  expect(out.trimEnd().split('\n').at(-1)).toBe('cleaned up')
  expect((await berth.profiles.list()).total).toBe(0)
  expect((await berth.apiKeys.list()).total).toBe(0)
  expect((await berth.workspaces.list()).total).toBe(0)
})
