/**
 * A submit that no runtime can run is refused at submit with a clear error: never
 * accepted (202) and then failed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { BerthClient } from '@berth/client'
import { clientFor, failure, startServer, type TestServer } from './helpers.js'

describe('tasks on a server with no container runtime', () => {
  let s: TestServer
  let api: BerthClient
  let profileId: string
  beforeAll(async () => {
    s = await startServer() // no runtime, no pool
    api = clientFor(s, (await s.user()).token)
    const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
    profileId = (await api.profiles.create({ body: { name: 'Agent', slug: 'agent', api_key_id: key.id } })).id
  })
  afterAll(async () => {
    await s.close()
  })

  it.each(['batch', 'session'] as const)(
    'refuses a %s submit with CONTAINER_FAILED, and stores no task or workspace',
    async (mode) => {
      const res = await failure(api.tasks.submit({ body: { mode, profile_id: profileId, prompt: 'Check the shell.' } }))
      expect(res.status).toBe(502)
      expect(res.body).toEqual({
        code: 'CONTAINER_FAILED',
        error: 'This server has no container runtime configured, so it cannot run tasks',
      })
      expect(await api.tasks.list()).toMatchObject({ tasks: [], total: 0 })
      expect(await api.workspaces.list()).toMatchObject({ workspaces: [], total: 0 })
    },
  )
})
