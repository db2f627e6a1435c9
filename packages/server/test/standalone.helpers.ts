/**
 * The standalone server (`examples/standalone-server`) as a real child process, the way an
 * operator runs it: its own process group (so `pnpm start`'s children stop with it), its
 * output kept for assertions and failure messages.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

/** The repository root. */
export const REPO_ROOT = fileURLToPath(new URL('../../..', import.meta.url))

/** A TCP port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

export interface Standalone {
  url: string
  child: ChildProcess
  /** Everything it printed so far (stdout and stderr). */
  output(): string
  /** SIGTERM to its process group; resolves with the exit code once every process that holds its output is gone. */
  stop(): Promise<number | null>
}

/**
 * Start `command` in `cwd` with exactly `env` (nothing inherited but what is passed) and
 * wait until `GET /health` on `127.0.0.1:<port>` answers. Rejects with the output when it
 * exits first or `timeoutMs` passes.
 *
 * @example
 * ```ts
 * const s = await startStandalone({ command: [TSX, MAIN], cwd, port, env: { PATH: process.env.PATH!, PORT: String(port) } })
 * ```
 */
export async function startStandalone(opts: {
  command: string[]
  cwd: string
  env: Record<string, string>
  port: number
  timeoutMs?: number
}): Promise<Standalone> {
  const [file, ...args] = opts.command as [string, ...string[]]
  const child = spawn(file, args, { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()))
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()))
  // 'close', not 'exit': `pnpm start` exits on SIGTERM at once while the server it started
  // (which shares its stdout) is still shutting down; the pipes close when the last one is gone.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)))
  let done = false
  void exited.then(() => (done = true))
  const url = `http://127.0.0.1:${opts.port}`
  const stop = async () => {
    if (!done) {
      try {
        process.kill(-child.pid!, 'SIGTERM')
      } catch {
        // already gone
      }
    }
    return exited
  }
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000)
  for (;;) {
    if (done) throw new Error(`the server exited before it answered:\n${out}`)
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`the server did not answer /health in time:\n${out}`)
    }
    const ok = await fetch(`${url}/health`).then(
      (r) => r.ok,
      () => false,
    )
    if (ok) break
    // A loop rather than vi.waitFor: a child that exits must fail the start at once, not at the deadline.
    await new Promise((r) => setTimeout(r, 200))
  }
  return { url, child, output: () => out, stop }
}

/** The environment a child gets: PATH and HOME only, plus `settings`. */
export function bareEnv(settings: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', ...settings }
}
