/**
 * A clean stop on `local` (what the standalone server runs on SIGTERM: the Berth, then the
 * runtime, from `berthFromConfig`): no bubblewrap sandbox outlives it and nothing of its data
 * directory stays mounted (workspace disks, volume disks, /tmp and /root tmpfs). Sessions
 * come back after the next start: a follow-up resumes the conversation kept at the stop, and
 * a persistent session's files are on its volume.
 */
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { berthFromConfig, configFromEnv, type ConfiguredBerth } from '@berth/server'
import { afterAll, expect, it } from 'vitest'
import { ADMIN_TOKEN, clientFor, waitForTask } from './helpers.js'

const dir = mkdtempSync(join(tmpdir(), 'berth-local-stop-'))
afterAll(() => {
  // Whatever a failed run left: its sandboxes killed and its mounts gone before the directory.
  for (const line of processesOfDataDir()) {
    try {
      process.kill(Number(line.split(':')[0]), 'SIGKILL')
    } catch {
      // gone meanwhile
    }
  }
  for (const line of mountsOfDataDir().reverse()) execFileSync('umount', ['-l', line.split(' ')[1]!])
  rmSync(dir, { recursive: true, force: true })
})

/** A Berth from the SETTINGS table on `local` in `dir`, served over HTTP. */
async function start(): Promise<{ configured: ConfiguredBerth; server: Server; url: string }> {
  const configured = await berthFromConfig(
    configFromEnv({
      BERTH_DATA_DIR: dir,
      BERTH_RUNTIME: 'local',
      BERTH_ADMIN_TOKEN: ADMIN_TOKEN,
      BERTH_RATE_RPM: '100000',
      BERTH_RATE_BURST: '10000',
      BERTH_METRICS: 'off',
    }),
    { warn: () => {} },
  )
  await configured.berth.ready
  const server = createServer(configured.berth.handler)
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return { configured, server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

/** Stopped as the standalone server stops: the HTTP server, then Berth and its runtime. */
async function stop(s: Awaited<ReturnType<typeof start>>): Promise<void> {
  s.server.closeAllConnections()
  await new Promise<void>((r) => s.server.close(() => r()))
  await s.configured.close()
}

/** Processes whose command line names the data directory (the sandboxes and their keepers). */
function processesOfDataDir(): string[] {
  const out: string[] = []
  for (const pid of readdirSync('/proc').filter((e) => /^\d+$/.test(e) && Number(e) !== process.pid)) {
    const cmdline = (() => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8')
      } catch {
        return '' // gone meanwhile
      }
    })()
    if (cmdline.includes(dir)) out.push(`${pid}: ${cmdline.replaceAll('\0', ' ').slice(0, 200)}`)
  }
  return out
}

/** This host's mounts at or under the data directory. */
const mountsOfDataDir = () =>
  readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .filter((line) => line.split(' ')[1]?.startsWith(dir))

it('ends every sandbox and unmounts everything under its data directory; sessions resume after the next start', async () => {
  let s = await start()
  const res = await fetch(`${s.url}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'stopper', role: 'user' }),
  })
  const token = ((await res.json()) as { key: { token: string } }).key.token
  let api = clientFor({ url: s.url }, token)
  const key = await api.apiKeys.create({ body: { name: 'offline', provider: 'stub' } })
  const body = { api_key_id: key.id, default_tools: ['Bash'] }
  const profile = await api.profiles.create({ body: { ...body, name: 'Agent', slug: 'agent' } })
  const keeper = await api.profiles.create({
    body: { ...body, name: 'Keeper', slug: 'keeper', persistent_sessions: true },
  })
  const run = async (input: { profile_id: string; prompt: string; session_id?: string }) => {
    const { task_id } = await api.tasks.submit({ body: { mode: 'session', ...input } })
    const task = await waitForTask(api, task_id, { timeout: 120_000 })
    expect(task.status, JSON.stringify(task.error)).toBe('completed')
    return task
  }
  // Two warm sessions: one on its own workspace disk, one on its volume's disk.
  const told = await run({ profile_id: profile.id, prompt: 'The password is OSPREY-9.' })
  const wrote = await run({
    profile_id: keeper.id,
    prompt: 'Write a note. [[berth:tool Bash {"command":"echo kept-across-stops > note.txt"}]]',
  })
  expect(processesOfDataDir()).not.toEqual([])
  expect(mountsOfDataDir()).not.toEqual([])

  await stop(s)
  expect(processesOfDataDir()).toEqual([])
  expect(mountsOfDataDir()).toEqual([])

  s = await start()
  api = clientFor({ url: s.url }, token)
  try {
    const recalled = await run({
      profile_id: profile.id,
      session_id: told.session_id!,
      prompt: 'Say it back. [[berth:recall]]',
    })
    expect(recalled.result!.text).toContain('OSPREY-9')
    const read = await run({
      profile_id: keeper.id,
      session_id: wrote.session_id!,
      prompt: 'Read it. [[berth:tool Bash {"command":"cat note.txt"}]]',
    })
    const events = (await api.tasks.events({ params: { id: read.task_id }, query: { limit: 100 } })).events
    expect(events.find((e) => e.type === 'tool_result')).toMatchObject({
      output: expect.stringContaining('kept-across-stops'),
    })
  } finally {
    await stop(s)
  }
  expect(processesOfDataDir()).toEqual([])
  expect(mountsOfDataDir()).toEqual([])
}, 300_000)
