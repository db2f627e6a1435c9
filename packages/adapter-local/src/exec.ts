import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import {
  ContainerError,
  byteChannel,
  toByteChunks,
  type ExecOptions,
  type ExecProcess,
  type ExecResult,
} from '@berth/core'
import { exitCodeOf, killTree } from './processes.js'

/** A host process to spawn: what a container command becomes. */
export interface Launch {
  file: string
  args: string[]
  /** Host directory to run in. */
  cwd: string
  env: Record<string, string>
}

/** How a local exec learns that its "container" is still there. */
export interface LocalExecContext {
  id: string
  /** How to start `cmd` in the container (plain, or inside its sandbox), with the exec's env added. */
  launch: (cmd: string[], env: Record<string, string>) => Launch
  /** Resolves to a reason when the container's main process is gone, else null. */
  checkDead: () => Promise<string | null>
  watchIntervalMs: number
  /** Track the process so `stop`/`remove` can kill it. */
  track: (pid: number) => () => void
}

/**
 * Run a command as a host child process in its own process group (so `kill()` takes its
 * children too), with the container's env. A watchdog checks the container's main process;
 * when it dies, the command is killed and `exit` rejects with CONTAINER_FAILED `died`.
 *
 * @example
 * ```ts
 * const proc = startLocalExec(ctx, { cmd: ['sh', '-c', 'echo hi'] })
 * ```
 */
export function startLocalExec(ctx: LocalExecContext, opts: ExecOptions): ExecProcess {
  const stdout = byteChannel(opts.onStdout)
  const stderr = byteChannel(opts.onStderr)
  if (opts.signal?.aborted) {
    stdout.end()
    stderr.end()
    return { stdout, stderr, exit: Promise.resolve({ exitCode: null, killed: true }), kill: async () => {} }
  }
  const hasStdin = opts.stdin !== undefined
  const how = ctx.launch(opts.cmd, { ...opts.env, BERTH_EXEC_ID: randomUUID() })
  const child = spawn(how.file, how.args, {
    cwd: how.cwd,
    env: how.env,
    detached: true, // own process group
    stdio: [hasStdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  })
  const untrack = child.pid ? ctx.track(child.pid) : () => {}

  let settled = false
  let killed = false
  let resolveExit!: (r: ExecResult) => void
  let rejectExit!: (e: ContainerError) => void
  const exit = new Promise<ExecResult>((resolve, reject) => {
    resolveExit = resolve
    rejectExit = reject
  })
  exit.catch(() => {})
  let watch: NodeJS.Timeout | undefined
  const onAbort = () => void kill()
  const finish = (outcome: { result: ExecResult } | { error: ContainerError }) => {
    if (settled) return
    settled = true
    clearInterval(watch)
    untrack()
    opts.signal?.removeEventListener('abort', onAbort)
    stdout.end()
    stderr.end()
    if ('error' in outcome) rejectExit(outcome.error)
    else resolveExit(outcome.result)
  }

  child.stdout!.on('data', (c: Buffer) => stdout.push(new Uint8Array(c)))
  child.stderr!.on('data', (c: Buffer) => stderr.push(new Uint8Array(c)))
  child.on('error', (err: NodeJS.ErrnoException) => {
    // The command could not start (not found, not executable): engines report 126/127.
    stderr.push(new TextEncoder().encode(`${opts.cmd[0]}: ${err.message}\n`))
    finish({ result: { exitCode: err.code === 'ENOENT' ? 127 : 126, killed } })
  })
  child.on('close', (code, signal) => {
    void ctx.checkDead().then((dead) => {
      if (dead && !killed) {
        finish({ error: died(ctx.id, opts.cmd[0]!, dead) })
      } else finish({ result: { exitCode: exitCodeOf(code, signal), killed } })
    })
  })

  watch = setInterval(() => {
    void ctx.checkDead().then((dead) => {
      if (!dead || settled) return
      if (child.pid) killTree(child.pid)
      finish({ error: died(ctx.id, opts.cmd[0]!, dead) })
    })
  }, ctx.watchIntervalMs)
  watch.unref()

  const kill = async () => {
    if (settled) return
    killed = true
    if (child.pid) killTree(child.pid)
  }
  opts.signal?.addEventListener('abort', onAbort, { once: true })

  if (hasStdin) {
    const sink = child.stdin!
    sink.on('error', () => {}) // EPIPE when the command does not read its input
    void (async () => {
      try {
        for await (const chunk of toByteChunks(opts.stdin!)) {
          if (settled || sink.destroyed) break
          if (!sink.write(chunk)) await new Promise<void>((r) => sink.once('drain', r).once('close', r))
        }
      } catch {
        // a failing stdin source just closes stdin early
      } finally {
        sink.end()
      }
    })()
  }
  return { stdout, stderr, exit, kill }
}

function died(id: string, cmd: string, why: string): ContainerError {
  return new ContainerError('died', `local container ${id} ${why} while running ${cmd}`, {
    runtime: 'local',
    op: 'exec',
    id,
  })
}
