import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { agentUser, giveToAgent, spawnAs } from '../src/agent-user.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

/** A workspace owned by uid 1000 (the container's user), inside a root-owned directory. */
function workspace(): { top: string; ws: string; passwd: string } {
  const top = mkdtempSync(join(tmpdir(), 'berth-agent-user-'))
  dirs.push(top)
  const ws = join(top, 'workspace')
  mkdirSync(ws)
  chownSync(ws, 1000, 1000)
  const passwd = join(top, 'passwd')
  writeFileSync(passwd, 'root:x:0:0:root:/root:/bin/bash\nnode:x:1000:1000::/home/node:/bin/bash\n')
  return { top, ws, passwd }
}

// The suite runs as root, as the runner does in an engine container (CI and the engines need root too).
describe('the agent user (runner as root)', () => {
  it('is the owner of the workspace, found from a directory not made yet, with its passwd name and home', () => {
    const { ws, passwd } = workspace()
    expect(agentUser(join(ws, 'sub', 'deeper'), passwd)).toEqual({
      uid: 1000,
      gid: 1000,
      name: 'node',
      home: '/home/node',
      root: ws,
    })
  })

  it('is the runner itself when the runner is not root', () => {
    const { ws, passwd } = workspace()
    const uid = process.getuid
    process.getuid = () => 1000
    try {
      expect(agentUser(ws, passwd)).toBeNull()
    } finally {
      process.getuid = uid
    }
  })

  it('is nobody when only root owns the path (the agent then shares the runner uid)', () => {
    const { top, passwd } = workspace()
    expect(agentUser(top, passwd)).toBeNull()
  })

  it('gets what root made inside its directory, and nothing above or beside it', () => {
    const { top, ws, passwd } = workspace()
    const user = agentUser(ws, passwd)!
    const file = join(ws, '.claude', 'skills', 'greet', 'SKILL.md')
    mkdirSync(join(ws, '.claude', 'skills', 'greet'), { recursive: true })
    writeFileSync(file, 'x')
    const outside = join(top, 'outside.txt')
    writeFileSync(outside, 'x')
    giveToAgent(user, file)
    for (const p of [file, join(ws, '.claude', 'skills', 'greet'), join(ws, '.claude')])
      expect(statSync(p).uid).toBe(1000)
    giveToAgent(user, outside)
    expect(statSync(outside).uid).toBe(0)
    expect(statSync(top).uid).toBe(0)
  })

  it('starts the process as that user, with its HOME', async () => {
    const { ws, passwd } = workspace()
    const user = agentUser(ws, passwd)!
    const child = spawnAs(user)({
      command: 'sh',
      args: ['-c', 'echo "$(id -u):$(id -g):$(id -G):$HOME:$USER"'],
      cwd: ws,
      env: { PATH: process.env.PATH, HOME: '/root' },
      signal: new AbortController().signal,
    })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d))
    await new Promise((r) => child.on('exit', r))
    // No supplementary groups are kept from root.
    expect(out.trim()).toBe('1000:1000:1000:/home/node:node')
  })

  it('makes a missing HOME, owned by the user (a read-only root puts an empty tmpfs on /home)', async () => {
    const { top, ws, passwd } = workspace()
    chmodSync(top, 0o755) // mkdtemp's 0700 would keep the user out whatever its home
    const home = join(top, 'home', 'node')
    const user = { ...agentUser(ws, passwd)!, home }
    const child = spawnAs(user)({
      command: 'sh',
      args: ['-c', 'touch "$HOME/.probe" && echo ok'],
      cwd: ws,
      env: { PATH: process.env.PATH },
      signal: new AbortController().signal,
    })
    let out = ''
    child.stdout.on('data', (d: Buffer) => (out += d))
    await new Promise((r) => child.on('exit', r))
    expect(out.trim()).toBe('ok')
    expect(statSync(home).uid).toBe(1000)
  })
})
