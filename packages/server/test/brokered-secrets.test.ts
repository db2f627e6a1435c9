/**
 * A brokered secret, end to end from a container with no network of its own (Docker): the
 * agent's git sends `Authorization: Bearer $API_TOKEN` to two HTTPS listeners on this
 * machine's own address, through the broker's proxy. The one the secret names (its host and
 * port) receives the value, added at the proxy, over TLS the agent's git trusts through the
 * broker's CA; the other receives the placeholder the agent holds.
 */
import { createServer, type Server } from 'node:https'
import { DEFAULT_ENVIRONMENT_CAPS } from '@berth/core'
import { selfSignedCert } from '@berth/testkit/providers'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { clientFor, startServer, waitForTask, type TestServer } from './helpers.js'
import { engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'
import { RUNNER_BUNDLE } from './runner.global-setup.js'
import { hostAddress } from './net.helpers.js'

const VALUE = 'brokered-e2e-value-Qm38Zn71Kd'

interface Listener {
  server: Server
  port: number
  /** The Authorization header of every request, in order. */
  seen: (string | undefined)[]
}

async function listen(address: string, tls: { cert: string; key: string }): Promise<Listener> {
  const seen: (string | undefined)[] = []
  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    seen.push(req.headers.authorization)
    res.writeHead(404).end()
  })
  await new Promise<void>((r) => server.listen(0, address, r))
  return { server, port: (server.address() as { port: number }).port, seen }
}

const address = hostAddress()
const tls = selfSignedCert({ ips: [address] })
const { info, runtime } = engineRuntime('docker')
const pool = uniquePoolName('brokered')
let s: TestServer
let allowed: Listener
let other: Listener

beforeAll(async () => {
  allowed = await listen(address, tls)
  other = await listen(address, tls)
  s = await startServer({
    runtime,
    pool: { image: info.image, min: 0, max: 2, name: pool, spec: { network: 'none' } },
    runner: { bundleDir: RUNNER_BUNDLE },
    // The proxy trusts the listeners' certificate, and an environment may allowlist this machine's address.
    broker: { upstreamCa: [tls.cert] },
    environments: { caps: { ...DEFAULT_ENVIRONMENT_CAPS, allowPrivateDestinations: true } },
  })
  await s.berth.ready
}, 120_000)

afterAll(async () => {
  await s?.close()
  await Promise.all([allowed, other].map((l) => new Promise((r) => l?.server.close(r))))
  await sweep(runtime, pool)
})

it('the secret reaches the host and port it names, added at the proxy; another port of the same host gets the placeholder', async () => {
  const { token } = await s.user()
  const api = clientFor(s, token)
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const environment = await api.environments.create({
    body: {
      name: 'two-listeners',
      network: { policy: 'allowlist', allow: [{ host: address, ports: [allowed.port, other.port] }] },
    },
  })
  const profile = await api.profiles.create({
    body: {
      name: 'Caller',
      slug: 'caller',
      api_key_id: key.id,
      default_tools: ['Bash'],
      environment_id: environment.id,
    },
  })
  const secret = await api.secrets.create({
    body: {
      name: 'API_TOKEN',
      value: VALUE,
      delivery: 'brokered',
      hosts: [`${address}:${allowed.port}`],
      profile_ids: [profile.id],
    },
  })
  // git honours HTTPS_PROXY and GIT_SSL_CAINFO; the listeners answer 404, so each ls-remote fails after its request.
  const header = 'http.extraHeader=Authorization: Bearer $API_TOKEN'
  const command = [
    `git -c "${header}" ls-remote https://${address}:${allowed.port}/repo.git; echo allowed-exit=$?`,
    // Not intercepted: the tunnel shows the listener's own certificate, which the agent does not trust.
    `git -c http.sslVerify=false -c "${header}" ls-remote https://${address}:${other.port}/repo.git; echo other-exit=$?`,
    'echo "token=$API_TOKEN"',
  ].join('; ')
  const task = await waitForTask(
    api,
    (
      await api.tasks.submit({
        body: {
          mode: 'batch',
          profile_id: profile.id,
          prompt: `Call them. [[berth:tool Bash ${JSON.stringify({ command })}]] [[berth:text Called.]]`,
        },
      })
    ).task_id,
    { timeout: 120_000 },
  )
  const { events } = await api.tasks.events({ params: { id: task.task_id }, query: { limit: 100 } })
  const output = String(events.find((e) => e.type === 'tool_result')?.output ?? '')
  expect(task.status, output).toBe('completed')
  expect(allowed.seen, output).toContain(`Bearer ${VALUE}`)
  expect(other.seen, output).toEqual(expect.arrayContaining([`Bearer berth_brokered_${secret.id}`]))
  expect(other.seen).not.toContain(`Bearer ${VALUE}`)
  // The agent saw the placeholder only.
  expect(output).toContain(`token=berth_brokered_${secret.id}`)
  expect(JSON.stringify(events)).not.toContain(VALUE)
}, 180_000)
