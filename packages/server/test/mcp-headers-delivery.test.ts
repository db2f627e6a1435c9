/**
 * Remote MCP servers' headers with a credential broker: the runner's input holds a
 * placeholder per header (from the server's and the header's names), the egress proxy's
 * grant holds the value for the server URL's host, both computed apart and agreeing; stdio
 * servers' `env` and a run without a broker are as before.
 */
import { createAesGcmCipher, RunGrants, RunTokens } from '@berth/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mcpHeaderPlaceholder } from '../../core/src/resources/mcp-secrets.js'
import { materialize } from '../../core/src/tasks/materialize.js'
import { memoryStore } from '../src/storage/memory.js'
import { clientFor, startServer, type TestServer } from './helpers.js'

const DOCS_TOKEN = 'Bearer docs-header-Hn27Kd93Pq'
const DOCS_TEAM = 'team-header-Vb48Xs12'
const TOOL_TOKEN = 'Bearer tool-header-Lm65Rt80Wz'
const STDIO_ENV = 'stdio-env-value-Jc39Ue71'

// The server's key, so the test opens the MCP definitions the server stored sealed.
const ENCRYPTION_KEY = '7'.repeat(64)

let s: TestServer
beforeAll(async () => {
  s = await startServer({ encryptionKey: ENCRYPTION_KEY })
})
afterAll(() => s.close())

describe('remote MCP headers with a credential broker', () => {
  it('placeholders in the run input, values in the proxy grant for each server host; stdio env and brokerless runs unchanged', async () => {
    const user = await s.user()
    const owner = user.id
    const api = clientFor(s, user.token)
    const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
    const profile = await api.profiles.create({
      body: {
        name: 'P',
        slug: 'p',
        api_key_id: key.id,
        mcp_servers: {
          docs: {
            type: 'http',
            url: 'https://docs.mcp.example.test:8443/mcp',
            headers: { Authorization: DOCS_TOKEN, 'X-Team': DOCS_TEAM },
          },
          local: { type: 'stdio', command: 'local-mcp', env: { LOCAL_TOKEN: STDIO_ENV } },
        },
      },
    })
    // A caller's tool in scope of the profile: an MCP server like the profile's own.
    await api.tools.create({
      body: {
        name: 'search',
        server: { type: 'sse', url: 'https://[fd00::5]/sse', headers: { Authorization: TOOL_TOKEN } },
        profile_ids: [profile.id],
      },
    })
    const services = s.berth.services
    const record = await services.profiles.records.get(owner, profile.id)
    const tokens = new RunTokens(new Uint8Array(32).fill(9))
    const broker = {
      tokens,
      gateway_socket: '/run/berth/gateway.sock',
      proxy_socket: '/run/berth/proxy.sock',
      ca_file: '/run/berth/ca.pem',
    }
    const ws = { id: 'ws_m', owner_id: owner, model_override: null, sdk_session_id: null } as never
    const task = {
      id: 'task_m',
      owner_id: owner,
      prompt: 'hi',
      allowed_tools: null,
      max_turns: null,
      max_budget_usd: null,
    }
    const deps = { ...services, cipher: createAesGcmCipher(Buffer.from(ENCRYPTION_KEY, 'hex')) }

    const input = await materialize({ ...deps, broker }, task, record, ws)
    const docsAuth = mcpHeaderPlaceholder('docs', 'Authorization')
    expect(docsAuth).toMatch(/^berth_brokered_mcp_[0-9a-f]{16}$/)
    expect(input.mcp_servers.docs).toEqual({
      type: 'http',
      url: 'https://docs.mcp.example.test:8443/mcp',
      headers: { Authorization: docsAuth, 'X-Team': mcpHeaderPlaceholder('docs', 'X-Team') },
    })
    expect(input.mcp_servers.search).toMatchObject({
      headers: { Authorization: mcpHeaderPlaceholder('search', 'Authorization') },
    })
    expect(
      new Set([docsAuth, mcpHeaderPlaceholder('docs', 'X-Team'), mcpHeaderPlaceholder('search', 'Authorization')]).size,
    ).toBe(3)
    // A stdio server runs in the container: its env is there, and redacted from events.
    expect(input.mcp_servers.local).toMatchObject({ env: { LOCAL_TOKEN: STDIO_ENV } })
    expect(input.redact).toContain(STDIO_ENV)
    const whole = JSON.stringify(input)
    for (const value of [DOCS_TOKEN, DOCS_TEAM, TOOL_TOKEN]) expect(whole).not.toContain(value)

    // The proxy's grant, computed from the profile and tools alone, puts the values back for each server's host.
    const store = memoryStore()
    await store.set(`active-tasks:${task.id}`, { owner })
    await store.set(`tasks:${owner}:${task.id}`, {
      id: task.id,
      owner_id: owner,
      profile_id: profile.id,
      status: 'running',
    })
    const grants = new RunGrants({
      store,
      tokens,
      catalog: deps,
      profiles: services.profiles,
      environments: services.environments,
    })
    const grant = await grants.proxy(input.broker!.token)
    expect(grant?.brokered).toEqual(
      expect.arrayContaining([
        { placeholder: docsAuth, value: DOCS_TOKEN, hosts: ['docs.mcp.example.test'] },
        { placeholder: mcpHeaderPlaceholder('docs', 'X-Team'), value: DOCS_TEAM, hosts: ['docs.mcp.example.test'] },
        { placeholder: mcpHeaderPlaceholder('search', 'Authorization'), value: TOOL_TOKEN, hosts: ['fd00::5'] },
      ]),
    )
    expect(grant?.brokered).toHaveLength(3)
    // Once the task ended, the grant is gone with it.
    await store.set(`tasks:${owner}:${task.id}`, {
      id: task.id,
      owner_id: owner,
      profile_id: profile.id,
      status: 'completed',
    })
    expect(await grants.proxy(input.broker!.token)).toBeNull()

    // Without a broker the headers go into the container as before, and are redacted from events.
    const direct = await materialize(deps, task, record, ws)
    expect(direct.mcp_servers.docs).toMatchObject({ headers: { Authorization: DOCS_TOKEN, 'X-Team': DOCS_TEAM } })
    expect(direct.mcp_servers.search).toMatchObject({ headers: { Authorization: TOOL_TOKEN } })
    expect(direct.redact).toEqual(expect.arrayContaining([DOCS_TOKEN, DOCS_TEAM, TOOL_TOKEN, STDIO_ENV]))
  })
})
