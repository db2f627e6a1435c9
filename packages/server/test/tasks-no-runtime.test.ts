/**
 * A submit that no runtime can run is refused at submit with a clear error: never
 * accepted (202) and then failed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type TestServer, type Json } from './helpers.js'

describe('tasks on a server with no container runtime', () => {
  let s: TestServer
  let token: string
  let profileId: string
  const call = async (method: string, path: string, json?: unknown) => {
    const res = await s.request(path, { method, token, ...(json !== undefined && { json }) })
    return { status: res.status, body: (await res.json()) as Json }
  }
  beforeAll(async () => {
    s = await startServer() // no runtime, no pool
    token = (await s.user()).token
    const key = await call('POST', '/v1/api-keys', { name: 'offline', provider: 'stub' })
    profileId = (await call('POST', '/v1/profiles', { name: 'Agent', slug: 'agent', api_key_id: key.body.id })).body.id
  })
  afterAll(async () => {
    await s.close()
  })

  it.each(['batch', 'session'] as const)('refuses a %s submit with CONTAINER_FAILED, and stores no task or workspace', async (mode) => {
    const res = await call('POST', '/v1/tasks', { mode, profile_id: profileId, prompt: 'Check the shell.' })
    expect(res.status).toBe(502)
    expect(res.body).toEqual({ code: 'CONTAINER_FAILED', error: 'This server has no container runtime configured, so it cannot run tasks' })
    expect((await call('GET', '/v1/tasks')).body).toMatchObject({ tasks: [], total: 0 })
    expect((await call('GET', '/v1/workspaces')).body).toMatchObject({ workspaces: [], total: 0 })
  })
})
