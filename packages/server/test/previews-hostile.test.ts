/**
 * The audit's FINDINGS 15, end to end in the standalone server (`pnpm start`'s process) on the
 * `local` runtime (bubblewrap, the cheapest real session): an agent starts a server that
 * answers `HTTP/1.1 200 OK\x01` (and status `099` on `/status`), its owner opens a preview,
 * and anyone with the link fetches it. The server copies the first with Node's own reason
 * phrase, answers 502 for the second, and keeps answering `/health`; its last-resort guard
 * never had to act (the copy, not the guard, handles these bytes).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, it, vi } from 'vitest'
import { clientFor } from './helpers.js'
import { ADMIN, ENDED, pollTask, SERVER, userWithProfile } from './multi-instance.helpers.js'
import { daemonInContainer, HOSTILE_SOURCE } from './previews.helpers.js'
import { REPO_ROOT, bareEnv, freePort, type Standalone, startStandalone } from './standalone.helpers.js'

const dataDir = mkdtempSync(join(tmpdir(), 'berth-previews-hostile-'))
let s: Standalone

beforeAll(async () => {
  const port = await freePort()
  s = await startStandalone({
    command: SERVER,
    cwd: join(REPO_ROOT, 'examples/standalone-server'),
    port,
    env: bareEnv({
      PORT: String(port),
      BERTH_ADMIN_TOKEN: ADMIN,
      BERTH_DATA_DIR: dataDir,
      BERTH_RUNTIME: 'local',
    }),
  })
}, 180_000)

afterAll(async () => {
  await s?.stop()
  rmSync(dataDir, { recursive: true, force: true })
})

const health = async () => (await fetch(`${s.url}/health`)).status

it("an agent's server answering a reason phrase with \\x01, or status 099, gets a copy or a 502; Berth keeps serving", async () => {
  const { token, profileId } = await userWithProfile(s.url, 'Previewer')
  const api = clientFor(s, token)
  const port = await freePort()
  const sub = await api.tasks.submit({
    body: { mode: 'session', profile_id: profileId, prompt: daemonInContainer(HOSTILE_SOURCE(port), port, 60) },
  })
  const wsId = sub.workspace_id!
  await vi.waitFor(async () => expect((await api.workspaces.get({ params: { id: wsId } })).status).toBe('running'), {
    timeout: 60_000,
    interval: 500,
  })
  const p = await api.workspaces.previews.create({ params: { id: wsId }, body: { port } })
  // Until the agent's server listens, the preview is a 502 "nothing answered"; then its answer.
  await vi.waitFor(async () => expect((await fetch(p.url)).status).toBe(200), { timeout: 60_000, interval: 500 })
  const copied = await fetch(p.url)
  expect([copied.status, copied.statusText, await copied.text()]).toEqual([200, 'OK', 'hi'])
  expect(copied.headers.get('content-security-policy')).toMatch(/^sandbox allow-scripts/)
  expect(await health()).toBe(200)
  const refused = await fetch(`${p.url}status`)
  expect(refused.status).toBe(502)
  expect(await refused.json()).toMatchObject({ code: 'CONTAINER_FAILED' })
  expect(await health()).toBe(200)
  expect(s.child.exitCode).toBeNull()
  expect(s.output()).not.toContain('berth: contained an uncaught')
  await api.tasks.cancel({ params: { id: sub.task_id } })
  await pollTask(api, sub.task_id, (t) => ENDED.includes(t.status), 60_000)
  // The session's sandbox goes with its workspace, before the server stops.
  await api.workspaces.delete({ params: { id: wsId } })
}, 180_000)
