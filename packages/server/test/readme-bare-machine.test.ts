/**
 * The README's quick start on a bare machine: a fresh Debian root filesystem with Node 20
 * and npm only (no container engine, no bubblewrap; see bare-machine.helpers.ts). Its
 * set-up block, as written, must bring what the default runtime needs (Debian's bubblewrap,
 * installed by the repository's postinstall); then its `pnpm start` block serves, on the
 * `local` runtime, and its first-task block completes with the Bash call, all run inside.
 */
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, it } from 'vitest'
import { freshMachine, inMachine, removeMachine, runToEnd } from './bare-machine.helpers.js'
import { readmeBlock } from './readme.helpers.js'
import { freePort, startStandalone } from './standalone.helpers.js'

const dir = mkdtempSync(join(tmpdir(), 'berth-bare-'))
afterAll(() => removeMachine(dir))

it('the set-up line brings bubblewrap, then pnpm start runs the first task', async () => {
  const { root } = freshMachine(dir)
  const before = await runToEnd(
    inMachine(root, 'node --version; for c in bwrap docker podman pnpm; do command -v $c || echo "no $c"; done'),
  )
  expect(before.output).toMatch(/^v20\.[\s\S]*no bwrap\nno docker\nno podman\nno pnpm\n$/)

  const setup = await runToEnd(inMachine(root, readmeBlock('setup', 'sh'), {}, '/root/berth'))
  expect(setup.code, setup.output).toBe(0)
  expect(setup.output).toContain("installing Debian's bubblewrap")
  expect(existsSync(join(root, 'usr/bin/bwrap')), setup.output).toBe(true)

  const port = await freePort()
  const server = await startStandalone({
    command: inMachine(root, readmeBlock('start', 'sh'), { PORT: String(port) }, '/root/berth'),
    cwd: dir,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    port,
    timeoutMs: 900_000,
  })
  try {
    expect(server.output()).toContain('Runtime: local (/root/berth/.data/containers, bubblewrap sandbox)')
    const task = await runToEnd(
      inMachine(root, readmeBlock('first-task', 'sh'), { PATH: '/usr/local/bin:/usr/bin:/bin', BERTH: server.url }),
    )
    expect(task.code, `${task.output}\n--- server ---\n${server.output()}`).toBe(0)
    const shown = JSON.parse(task.stdout) as {
      status: string
      result: { tool_calls: { name: string; input: unknown }[] } | null
    }
    expect(shown.status, `${task.output}\n--- server ---\n${server.output()}`).toBe('completed')
    expect(shown.result?.tool_calls).toContainEqual(
      expect.objectContaining({ name: 'Bash', input: { command: 'uname -a' } }),
    )
  } finally {
    await server.stop()
  }
}, 1_800_000)
