/** examples/client-usage: the walk-through runs against a real server. */
import { afterAll, beforeAll, expect, it } from 'vitest'
import { createBerthClient } from '@berth/client'
import { startServer, type TestServer } from '../../server/test/helpers.js'
import { demo } from '../../../examples/client-usage/src/demo.js'

let s: TestServer
beforeAll(async () => {
  s = await startServer()
})
afterAll(() => s.close())

it('creates a stub credential and a profile, lists models, cleans up', async () => {
  const berth = createBerthClient({ baseURL: s.url, token: (await s.user()).token })
  const lines: string[] = []
  const { profile, models } = await demo(berth, (line) => lines.push(line))
  expect(profile.claude_md).toMatch(/Answer briefly/)
  expect(models.length).toBeGreaterThan(0)
  expect(models.every((m) => m.provider === 'stub')).toBe(true)
  expect(lines.at(-1)).toBe('cleaned up')
  expect((await berth.profiles.list()).total).toBe(0)
  expect((await berth.apiKeys.list()).total).toBe(0)
})
