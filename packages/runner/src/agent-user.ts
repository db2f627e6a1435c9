/**
 * The agent's own user. In an engine container the server execs the runner as root; Claude
 * Code and every tool it starts run as the container's unprivileged user (the owner of the
 * workspace). Being another uid, the agent cannot write to the runner's stdout
 * (`/proc/<runner>/fd/1`), read its memory or environment, or signal it: the runner's
 * protocol and the secrets it holds stay out of the agent's reach.
 */
import { spawn } from 'node:child_process'
import { chownSync, mkdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, relative, resolve } from 'node:path'
import type { SpawnedProcess, SpawnOptions } from '@anthropic-ai/claude-agent-sdk'

/** Who the agent runs as. */
export interface AgentUser {
  uid: number
  gid: number
  name: string
  home: string
  /** The directory found to be the agent's (the workspace): nothing above it is handed over. */
  root: string
}

/** The `/etc/passwd` entry of `uid`, when the image has one. */
function passwdEntry(uid: number, passwd: string): { name: string; home: string } | null {
  for (const line of passwd.split('\n')) {
    const f = line.split(':')
    if (f.length >= 6 && Number(f[2]) === uid) return { name: f[0]!, home: f[5]! }
  }
  return null
}

/**
 * The user the agent runs as: null unless the runner is root, else the owner of `cwd` or
 * of its nearest existing ancestor that is not root's (the container's user owns the
 * workspace). Null too when only root owns it (an image without a user): the agent then
 * shares the runner's uid, as before.
 *
 * @example
 * ```ts
 * agentUser('/workspace') // { uid: 1000, gid: 1000, name: 'node', home: '/home/node' } when run as root
 * ```
 */
export function agentUser(cwd: string, passwdFile = '/etc/passwd'): AgentUser | null {
  if (process.getuid?.() !== 0) return null
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    let st: ReturnType<typeof statSync> | null = null
    try {
      st = statSync(dir)
    } catch {
      // not made yet: its parent decides
    }
    if (st && st.uid !== 0) {
      let passwd = ''
      try {
        passwd = readFileSync(passwdFile, 'utf8')
      } catch {
        // no passwd: the uid is its own name
      }
      const entry = passwdEntry(st.uid, passwd)
      return { uid: st.uid, gid: st.gid, name: entry?.name ?? String(st.uid), home: entry?.home || dir, root: dir }
    }
    if (dirname(dir) === dir) return null
  }
}

/**
 * Hand what the root runner made to the agent: `path` and each directory above it that
 * root owns, up to the agent's own directory ({@link AgentUser.root}). Nothing outside that
 * directory is touched.
 *
 * @example
 * ```ts
 * giveToAgent(user, '/workspace/.claude/skills/greet/SKILL.md')
 * ```
 */
export function giveToAgent(user: AgentUser | null, path: string): void {
  if (!user) return
  const top = resolve(user.root)
  const target = resolve(path)
  if (relative(top, target).startsWith('..')) return
  for (let p = target; p !== top && p.startsWith(`${top}/`); p = dirname(p)) {
    try {
      if (statSync(p).uid !== 0) return
      chownSync(p, user.uid, user.gid)
    } catch {
      return // gone meanwhile: nothing to hand over
    }
  }
}

/**
 * The SDK's `spawnClaudeCodeProcess` that starts Claude Code as `user` (no supplementary
 * groups, its own HOME), with stdout as the SDK's pipe and stderr to `onStderr`.
 *
 * @example
 * ```ts
 * options.spawnClaudeCodeProcess = spawnAs({ uid: 1000, gid: 1000, name: 'node', home: '/home/node' })
 * ```
 */
export function spawnAs(user: AgentUser, onStderr?: (data: string) => void): (o: SpawnOptions) => SpawnedProcess {
  return (o) => {
    ensureHome(user)
    const child = spawn(o.command, o.args, {
      cwd: o.cwd,
      env: { ...o.env, HOME: user.home, USER: user.name, LOGNAME: user.name },
      signal: o.signal,
      uid: user.uid,
      gid: user.gid,
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    if (onStderr) child.stderr.on('data', (d: Buffer) => onStderr(d.toString('utf8')))
    else child.stderr.resume()
    return child
  }
}

/**
 * Make the agent's home when it is missing: with a read-only root the engine puts an empty
 * sized tmpfs on `/home`, which hides the image's home directories.
 */
function ensureHome(user: AgentUser): void {
  try {
    if (mkdirSync(user.home, { recursive: true, mode: 0o755 }) !== undefined) chownSync(user.home, user.uid, user.gid)
  } catch {
    // A home that cannot be made (`/nonexistent`, a read-only path): the agent goes without, as before.
  }
}
