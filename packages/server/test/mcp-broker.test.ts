/**
 * A remote MCP server's headers never enter a task's container (issue 25): the profile names
 * an MCP server over HTTPS on this machine's own address with an `Authorization` header; the
 * container has no network, and Claude Code reaches the server through the broker's egress
 * proxy, which puts the real header in place of its placeholder. The agent's tool call gets
 * the server's answer, the server got the real header, and a root search of the container
 * (files, every process's environment and command line) and of everything the agent printed
 * finds the value in no form. A warm agent, started before any task holds its token,
 * reaches the server as well once a task takes it.
 */
import { DEFAULT_ENVIRONMENT_CAPS, type PooledContainer } from '@berth/core'
import { selfSignedCert, startFakeMcpServer, type FakeMcpServer, type SelfSignedCert } from '@berth/testkit/providers'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { endSleep, forms, searchContainer, type SearchAnswer } from './broker-search.helpers.js'
import { clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { hostAddress } from './net.helpers.js'

const MCP_TOKEN = 'mcp-bearer-Qw83Zt61Lp09Xc27'

// The warm case runs under `public`, whose proxy refuses the host's own networks; its MCP
// server, on this host's address, stands for one on the internet. The refusal itself is
// tested in proxy-host-networks.test.ts.
vi.mock('../src/broker/host-networks.js', async (actual) => {
  const real = await actual<typeof import('../src/broker/host-networks.js')>()
  return { ...real, onHostNetwork: (address: string) => address !== hostAddress() && real.onHostNetwork(address) }
})

/** A caller with the offline model and a profile whose MCP server `docs` at `url` needs the header. */
async function mcpUser(s: TestServer, url: string, slug: string, tools: string[]) {
  const { token } = await s.user()
  const api = clientFor(s, token)
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const profile = await api.profiles.create({
    body: {
      name: slug,
      slug,
      api_key_id: key.id,
      default_tools: tools,
      mcp_servers: { docs: { type: 'http', url, headers: { Authorization: `Bearer ${MCP_TOKEN}` } } },
    },
  })
  return { api, profile }
}

describe.each(['docker', 'podman'] as const)(
  "a remote MCP server's headers are added at the egress proxy on %s",
  (kind) => {
    const pool = uniquePoolName(`mcp-${kind}`)
    const { runtime, info } = engineRuntime(kind)
    let tls: SelfSignedCert
    let mcp: FakeMcpServer
    let s: TestServer
    beforeAll(async () => {
      const address = hostAddress()
      tls = selfSignedCert({ ips: [address] })
      mcp = await startFakeMcpServer({ tls, token: MCP_TOKEN, host: address })
      s = await startServer({
        runtime,
        pool: { image: info.image, min: 0, max: 2, name: pool, spec: { network: 'none' } },
        runner: { bundleDir: RUNNER_BUNDLE },
        // The proxy trusts the test server's certificate towards it; the container trusts the broker's CA.
        broker: { upstreamCa: [tls.cert] },
        // The MCP server's host joins the allowlist; it is a private address of this machine.
        environments: {
          caps: { ...DEFAULT_ENVIRONMENT_CAPS, defaultPolicy: 'allowlist', allowPrivateDestinations: true },
        },
      })
      await s.berth.ready
    }, 120_000)
    afterAll(async () => {
      await s?.close()
      await mcp?.close()
      await sweep(runtime, pool)
    })

    it('the tool call reaches the server with the real header; the value is in no file, environment or output of the container', async () => {
      const { api, profile } = await mcpUser(s, mcp.url, 'mcp-user', ['Bash', 'mcp__docs__echo'])
      // What an injected prompt would try after using the server: dump every variable and the agent's configuration.
      const dump =
        'env; for p in /proc/[0-9]*; do tr "\\0" "\\n" < $p/environ 2>/dev/null; done; cat ~/.claude.json /workspace/.claude* 2>/dev/null; sleep 297'
      const submitted = await api.tasks.submit({
        body: {
          mode: 'batch',
          profile_id: profile.id,
          prompt: `[[berth:tool mcp__docs__echo {"text":"hello-through-the-proxy"}]] [[berth:tool Bash {"command":${JSON.stringify(dump)}}]] [[berth:text Used it.]]`,
        },
      })
      const needles = forms(MCP_TOKEN).map((form) => ({ name: 'mcp header', form }))
      // While the Bash call sleeps: search the task's container as root, and the agent's processes as its user.
      let answer: SearchAnswer | null = null
      for (let i = 0; i < 300 && !answer; i++) {
        const events = (await api.tasks.events({ params: { id: submitted.task_id }, query: { limit: 100 } })).events
        if (events.some((e) => e.type === 'tool_call' && 'name' in e && e.name === 'Bash')) {
          const [container] = await runtime.list({
            labels: { 'berth.pool': pool, 'berth.workspace': submitted.workspace_id },
          })
          expect(container, 'the task has a container').toBeDefined()
          const skip = ['/proc', '/sys', '/dev']
          const asRoot = await searchContainer(runtime, container!.id, 'root', { needles, skip, files: true })
          // The agent's user may read the memory of its own processes, the runner's and Claude Code's included.
          const asAgent = await searchContainer(runtime, container!.id, '1000:1000', {
            needles,
            skip,
            files: false,
            memory: true,
          })
          answer = {
            found: [...asRoot.found, ...asAgent.found],
            token: null,
            files: asRoot.files,
            regions: asAgent.regions ?? 0,
          }
          // Done: the agent's long Bash call may end, and with it the task.
          await endSleep(runtime, container!.id, 297)
        } else await new Promise((r) => setTimeout(r, 100))
      }
      expect(answer, 'the search ran while the agent worked').not.toBeNull()
      expect(answer!.files).toBeGreaterThan(10)
      expect(answer!.regions).toBeGreaterThan(10)
      expect(answer!.found, JSON.stringify(answer!.found)).toEqual([])

      const done = await waitForTask(api, submitted.task_id, { timeout: 120_000 })
      const events = (await api.tasks.events({ params: { id: submitted.task_id }, query: { limit: 100 } })).events
      expect(done.status, JSON.stringify({ done, events })).toBe('completed')
      expect(done.result?.text).toContain('Used it.')
      // The tool result holds the MCP server's answer: the call went out and came back.
      const results = events.filter((e) => e.type === 'tool_result')
      expect(results[0]).toMatchObject({
        is_error: false,
        output: expect.stringContaining('echo: hello-through-the-proxy'),
      })
      expect(mcp.calls).toEqual([{ tool: 'echo', args: { text: 'hello-through-the-proxy' } }])
      // Every request the server answered carried the real header, put there by the proxy.
      const answered = mcp.requests.filter((r) => r.rpc.length > 0)
      expect(answered.flatMap((r) => r.rpc)).toEqual(expect.arrayContaining(['initialize', 'tools/list', 'tools/call']))
      for (const r of mcp.requests) expect(r.authorization).toBe(`Bearer ${MCP_TOKEN}`)
      // Everything the agent printed holds none of the value's forms.
      const printed = JSON.stringify(events)
      for (const form of forms(MCP_TOKEN)) expect(printed).not.toContain(form)
    }, 300_000)
  },
)

describe('a warm agent reaches a brokered MCP server once a task takes it (docker)', () => {
  const pool = uniquePoolName('mcp-warm')
  const { runtime, info } = engineRuntime('docker')
  let mcp: FakeMcpServer
  let s: TestServer
  beforeAll(async () => {
    const address = hostAddress()
    const tls = selfSignedCert({ ips: [address] })
    mcp = await startFakeMcpServer({ tls, token: MCP_TOKEN, host: address })
    s = await startServer({
      runtime,
      // Warm agents live in the default environment's own containers: `public` adds no spec of its own.
      pool: { image: info.image, min: 2, max: 6, name: pool, spec: { network: 'none' }, warmAgents: 1 },
      runner: { bundleDir: RUNNER_BUNDLE },
      broker: { upstreamCa: [tls.cert] },
      environments: { caps: { ...DEFAULT_ENVIRONMENT_CAPS, defaultPolicy: 'public', allowPrivateDestinations: true } },
    })
    await s.berth.ready
  }, 120_000)
  afterAll(async () => {
    await s?.close()
    await mcp?.close()
    await sweep(runtime, pool)
  })

  it('the second task like the first takes the parked agent, and its tool call gets the header at the proxy', async () => {
    const { api, profile } = await mcpUser(s, mcp.url, 'warm-mcp', ['mcp__docs__echo'])
    /** Containers holding a parked agent: in use, serving no workspace. */
    const parked = () =>
      (s.berth.pool!.list() as PooledContainer[])
        .filter((c) => c.state === 'in_use' && c.workspace_id === null)
        .map((c) => c.id)
    const run = async (text: string) => {
      const sub = await api.tasks.submit({
        body: {
          mode: 'batch',
          profile_id: profile.id,
          prompt: `[[berth:tool mcp__docs__echo {"text":"${text}"}]] [[berth:text ok]]`,
        },
      })
      const done = await waitForTask(api, sub.task_id, { timeout: 120_000 })
      const events = (await api.tasks.events({ params: { id: sub.task_id }, query: { limit: 100 } })).events
      expect(done.status, JSON.stringify({ done, events })).toBe('completed')
      return events.find((e) => e.type === 'tool_result')
    }
    // Cold, and it leaves an agent started with these settings (no task, so no grant, yet).
    expect(await run('cold')).toMatchObject({ is_error: false, output: 'echo: cold' })
    const [warm] = await vi.waitFor(() => {
      const p = parked()
      if (p.length !== 1) throw new Error(`parked: ${p.length}`)
      return p
    }, 60_000)
    expect(await run('warm')).toMatchObject({ is_error: false, output: 'echo: warm' })
    expect(parked(), 'the parked agent served the task').not.toContain(warm)
    expect(mcp.calls.map((c) => c.args.text)).toEqual(['cold', 'warm'])
    for (const r of mcp.requests) expect(r.authorization).toBe(`Bearer ${MCP_TOKEN}`)
  }, 300_000)
})
