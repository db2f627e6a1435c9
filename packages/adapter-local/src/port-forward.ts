/**
 * Reaching a port inside a local sandbox (previews). Every bwrap sandbox has a network
 * namespace of its own, so its `127.0.0.1:8000` is not the host's: a small forwarder is
 * started inside that namespace (`nsenter --net`, root only) and listens on a unix socket
 * on the host, which it pipes to the sandbox's loopback port and nowhere else.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

// Runs in the sandbox's network namespace (host mounts): unix socket → 127.0.0.1:<port>
// there; exits when the sandbox process it entered through is gone.
const FORWARDER = `
const net = require('node:net'), fs = require('node:fs')
const [path, port, pid] = process.argv.slice(1)
const server = net.createServer((c) => {
  const u = net.connect(Number(port), '127.0.0.1')
  c.pipe(u).pipe(c)
  c.on('error', () => u.destroy())
  u.on('error', () => c.destroy())
})
server.listen(path, () => { fs.chmodSync(path, 0o600); process.stdout.write('ready\\n') })
setInterval(() => { try { process.kill(Number(pid), 0) } catch { process.exit(0) } }, 2000)
`

/** Whether a LISTEN socket on `port` shows in the network namespace `pid` is in (IPv4 or IPv6). */
function listens(pid: number, port: number): boolean {
  for (const file of ['tcp', 'tcp6']) {
    let text: string
    try {
      text = readFileSync(`/proc/${pid}/net/${file}`, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/)
      if (f[3] === '0A' && Number.parseInt(f[1]?.split(':')[1] ?? '', 16) === port) return true
    }
  }
  return false
}

const netns = (pid: number | 'self'): string | null => {
  try {
    return readlinkSync(`/proc/${pid}/ns/net`)
  } catch {
    return null
  }
}

export interface PortForwarders {
  /** The unix socket that reaches `port` in the sandbox of one of `pids`, or null when none of them listens there. */
  socketFor(id: string, pids: readonly number[], port: number): Promise<string | null>
  /** Stop the forwarders of a container (it stopped or went). */
  closeFor(id: string): void
  closeAll(): void
}

/**
 * Forwarders into sandboxes' network namespaces, one per container, namespace and port,
 * reused while alive. Needs root (entering a namespace); elsewhere every answer is null.
 *
 * @example
 * ```ts
 * const path = await forwarders.socketFor(id, sandboxPids, 8000) // http.request({ socketPath: path, … })
 * ```
 */
export function portForwarders(): PortForwarders {
  const running = new Map<string, { child: ChildProcess; path: string; dir: string }>()
  const host = netns('self')
  const stop = (key: string) => {
    const f = running.get(key)
    if (!f) return
    running.delete(key)
    f.child.kill('SIGKILL')
    rmSync(f.dir, { recursive: true, force: true })
  }
  return {
    async socketFor(id, pids, port) {
      if (process.getuid?.() !== 0) return null
      const seen = new Set<string>()
      for (const pid of pids) {
        const ns = netns(pid)
        if (!ns || ns === host || seen.has(ns)) continue
        seen.add(ns)
        if (!listens(pid, port)) continue
        const key = `${id}\0${ns}\0${port}`
        const known = running.get(key)
        if (known && known.child.exitCode === null) return known.path
        stop(key)
        const dir = mkdtempSync(join(tmpdir(), 'berth-fwd-'))
        const path = join(dir, 'port.sock')
        const child = spawn(
          'nsenter',
          [`--net=/proc/${pid}/ns/net`, '--', process.execPath, '-e', FORWARDER, path, String(port), String(pid)],
          {
            stdio: ['ignore', 'pipe', 'ignore'],
          },
        )
        const ready = await new Promise<boolean>((resolve) => {
          child.stdout!.once('data', () => resolve(true))
          child.once('exit', () => resolve(false))
          child.once('error', () => resolve(false))
        })
        if (!ready) {
          rmSync(dir, { recursive: true, force: true })
          continue
        }
        child.once('exit', () => {
          if (running.get(key)?.child === child) stop(key)
        })
        running.set(key, { child, path, dir })
        return path
      }
      return null
    },
    closeFor(id) {
      for (const key of [...running.keys()]) if (key.startsWith(`${id}\0`)) stop(key)
    },
    closeAll() {
      for (const key of [...running.keys()]) stop(key)
    },
  }
}
