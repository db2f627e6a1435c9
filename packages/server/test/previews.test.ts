/**
 * Previews on Docker and Podman: an agent starts an HTTP + WebSocket server on port 8000 in
 * its session container; the preview URL serves its pages (any method, bodies) and echoes over
 * a WebSocket; only the owner creates, lists and revokes; revoked and expired links are 404;
 * crafted request targets never reach anything but that container's port (a listener on the
 * host counts every connection, and must get none).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { failure } from './helpers.js'
import { engineRuntime, ENGINES, sweep, uniquePoolName } from './pool.helpers.js'
import { agentUser, taskServer } from './tasks.helpers.js'
import { echoOverWebSocket, rawExchange, rawRequest, serveInContainer, tripwire } from './previews.helpers.js'

describe.each(ENGINES)('previews on %s', (engine) => {
  let t: Awaited<ReturnType<typeof taskServer>>
  let wsId: string
  let wire: Awaited<ReturnType<typeof tripwire>>
  const { info, runtime } = engineRuntime(engine)

  beforeAll(async () => {
    wire = await tripwire()
    // The default environment: the operator's default network policy (public), enforced by the firewall.
    t = await taskServer(engine, {
      sessionIdleMs: 600_000,
      berth: { pool: { image: info.image, min: 0, max: 4, name: uniquePoolName(`previews-${engine}`) } },
    })
    const task = await t.run({ mode: 'session', prompt: serveInContainer(8000) })
    expect(task.status, JSON.stringify(task.error)).toBe('completed')
    expect(JSON.stringify(task.result?.tool_calls)).toContain('started')
    wsId = task.workspace_id!
  }, 180_000)

  afterAll(async () => {
    await wire?.close()
    await t?.s.close()
    if (t) await sweep(runtime, t.pool)
  })

  it('serves the port over HTTP (methods, bodies, paths) and WebSocket, without the Berth key', async () => {
    const p = await t.api.workspaces.previews.create({ params: { id: wsId }, body: { port: 8000 } })
    expect(p.url).toMatch(new RegExp(`^${t.s.url}/preview/[A-Za-z0-9_-]{43}/$`))
    expect(p.port).toBe(8000)
    const root = await fetch(p.url, { headers: { authorization: `Bearer ${t.token}` } })
    expect(root.status).toBe(200)
    // The agent's page gets an opaque origin: it cannot read what the console keeps on Berth's.
    expect(root.headers.get('content-security-policy')).toMatch(/^sandbox allow-scripts/)
    expect(await root.text()).toBe('hello GET / auth= body=')
    const posted = await fetch(`${p.url}api/items?x=1`, {
      method: 'POST',
      body: 'a-body',
      headers: { authorization: 'Basic dTpw' },
    })
    expect(await posted.text()).toBe('hello POST /api/items?x=1 auth=Basic dTpw body=a-body')
    const echoed = await echoOverWebSocket(`${p.url.replace(/^http/, 'ws')}socket`, 'ping-preview')
    expect(echoed).toBe('echo:ping-preview')
    const { previews, total } = await t.api.workspaces.previews.list({ params: { id: wsId } })
    expect(total).toBe(1)
    expect(previews[0]).toEqual({
      id: p.id,
      workspace_id: wsId,
      port: 8000,
      expires_at: p.expires_at,
      created_at: p.created_at,
    })
    expect(JSON.stringify(previews)).not.toContain(p.url.split('/')[4])
    await t.api.workspaces.previews.revoke({ params: { id: wsId, preview_id: p.id } })
    expect((await fetch(p.url)).status).toBe(404)
    const again = await failure(t.api.workspaces.previews.revoke({ params: { id: wsId, preview_id: p.id } }))
    expect(again.status).toBe(404)
    await expect(echoOverWebSocket(`${p.url.replace(/^http/, 'ws')}socket`, 'x')).rejects.toThrow('404')
    expect((await t.api.workspaces.previews.list({ params: { id: wsId } })).total).toBe(0)
  })

  it('crafted targets reach that port or nothing: never the host', async () => {
    const p = await t.api.workspaces.previews.create({ params: { id: wsId }, body: { port: 8000 } })
    const token = p.url.split('/')[4]!
    const at = `127.0.0.1:${wire.port}`
    // Whatever the path says, it is a path on the container's port.
    for (const path of [
      `/preview/${token}/../..`,
      `/preview/${token}/%2e%2e/%2e%2e/v1/health`,
      `/preview/${token}/http://${at}/`,
      `/preview/${token}//${at}/x`,
    ]) {
      const res = await rawRequest(t.s.url, path)
      expect(res, path).toEqual({
        status: 200,
        body: `hello GET ${path.slice(`/preview/${token}`.length)} auth= body=`,
      })
    }
    // Encoded slashes or dots in the token, an absolute-form target, and CONNECT: no preview at all.
    for (const path of [`/preview/${token}%2F..%2F`, `/preview/%2e%2e/${token}/`, `http://${at}/preview/${token}/`]) {
      expect((await rawRequest(t.s.url, path)).status, path).toBe(404)
    }
    for (const target of [at, `/preview/${token}/`]) {
      const answer = await rawExchange(t.s.url, `CONNECT ${target} HTTP/1.1\r\nhost: ${at}\r\n\r\n`)
      expect(answer).not.toContain('tripwire')
      expect(answer).not.toMatch(/^HTTP\/1\.1 200/)
    }
    const upgrade = await rawExchange(
      t.s.url,
      `GET http://${at}/preview/${token}/ HTTP/1.1\r\nhost: ${at}\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n`,
    )
    expect(upgrade).not.toContain('tripwire')
    expect(wire.hits()).toBe(0)
  })

  it('only the owner creates, lists and revokes; bad ports and lifetimes are 400', async () => {
    const other = await agentUser(t.s)
    expect(
      (await failure(other.api.workspaces.previews.create({ params: { id: wsId }, body: { port: 8000 } }))).status,
    ).toBe(404)
    expect((await failure(other.api.workspaces.previews.list({ params: { id: wsId } }))).status).toBe(404)
    const mine = await t.api.workspaces.previews.create({ params: { id: wsId }, body: { port: 8000 } })
    expect(
      (await failure(other.api.workspaces.previews.revoke({ params: { id: wsId, preview_id: mine.id } }))).status,
    ).toBe(404)
    expect((await fetch(mine.url)).status).toBe(200)
    for (const body of [{ port: 0 }, { port: 65536 }, { port: 80.5 }, { port: 8000, ttl_s: 86_401 }]) {
      const err = await failure(t.api.workspaces.previews.create({ params: { id: wsId }, body }))
      expect(err.status, JSON.stringify(body)).toBe(400)
    }
    // An unknown token and a well-formed guess are the same 404.
    expect((await fetch(`${t.s.url}/preview/${'a'.repeat(43)}/`)).status).toBe(404)
    expect((await fetch(`${t.s.url}/preview/nope/`)).status).toBe(404)
  })

  it('a batch task is 400 while it runs and 409 once its container is gone; a link expires', async () => {
    const sub = await t.submit({
      mode: 'batch',
      prompt: `Wait. [[berth:tool Bash ${JSON.stringify({ command: 'echo waiting; sleep 6' })}]]`,
    })
    let ws = await t.api.workspaces.get({ params: { id: sub.workspace_id! } })
    while (ws.status !== 'running') {
      await new Promise((r) => setTimeout(r, 200))
      ws = await t.api.workspaces.get({ params: { id: sub.workspace_id! } })
    }
    const running = await failure(t.api.workspaces.previews.create({ params: { id: ws.id }, body: { port: 8000 } }))
    expect(running.status).toBe(400)
    expect((await t.waitDone(sub.task_id)).status).toBe('completed')
    const gone = await failure(t.api.workspaces.previews.create({ params: { id: ws.id }, body: { port: 8000 } }))
    expect(gone.status).toBe(409)
    expect(gone.message).toContain('no warm container')
    // Expiry (the server's clock is a manual one): the link works until its time, then is 404.
    const p = await t.api.workspaces.previews.create({ params: { id: wsId }, body: { port: 8000, ttl_s: 60 } })
    t.s.clock.advance(59_000)
    expect((await fetch(p.url)).status).toBe(200)
    t.s.clock.advance(1_000)
    expect((await fetch(p.url)).status).toBe(404)
  }, 60_000)

  it("deleting the workspace ends its links (last: it removes the suite's session)", async () => {
    const p = await t.api.workspaces.previews.create({ params: { id: wsId }, body: { port: 8000 } })
    expect((await fetch(p.url)).status).toBe(200)
    await t.api.workspaces.delete({ params: { id: wsId } })
    expect((await fetch(p.url)).status).toBe(404)
  }, 60_000)
})
