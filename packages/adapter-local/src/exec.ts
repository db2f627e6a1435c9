import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { ContainerError, abortedExec, execLifecycle, type ExecOptions, type ExecProcess } from '@berth/core'
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
  if (opts.signal?.aborted) return abortedExec(opts)
  const hasStdin = opts.stdin !== undefined
  const how = ctx.launch(opts.cmd, { ...opts.env, BERTH_EXEC_ID: randomUUID() })
  const child = spawn(how.file, how.args, {
    cwd: how.cwd,
    env: how.env,
    detached: true, // own process group
    stdio: [hasStdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  })
  const untrack = child.pid ? ctx.track(child.pid) : () => {}
  const life = execLifecycle(opts, {
    kill: async () => {
      if (child.pid) killTree(child.pid)
    },
    cleanup: untrack,
  })

  child.stdout!.on('data', (c: Buffer) => life.stdout.push(new Uint8Array(c)))
  child.stderr!.on('data', (c: Buffer) => life.stderr.push(new Uint8Array(c)))
  child.on('error', (err: NodeJS.ErrnoException) => {
    // The command could not start (not found, not executable): engines report 126/127.
    life.stderr.push(new TextEncoder().encode(`${opts.cmd[0]}: ${err.message}\n`))
    life.finish({ result: { exitCode: err.code === 'ENOENT' ? 127 : 126, killed: life.killed } })
  })
  child.on('close', (code, signal) => {
    void ctx.checkDead().then((dead) => {
      if (dead && !life.killed) life.finish({ error: died(ctx.id, opts.cmd[0]!, dead) })
      else life.finish({ result: { exitCode: exitCodeOf(code, signal), killed: life.killed } })
    })
  })
  life.watch(ctx.watchIntervalMs, async () => {
    const dead = await ctx.checkDead()
    if (!dead || life.settled) return null
    if (child.pid) killTree(child.pid)
    return died(ctx.id, opts.cmd[0]!, dead)
  })
  if (hasStdin) {
    child.stdin!.on('error', () => {}) // EPIPE when the command does not read its input
    life.pumpStdin(child.stdin!)
  }
  return life.process
}

function died(id: string, cmd: string, why: string): ContainerError {
  return new ContainerError('died', `local container ${id} ${why} while running ${cmd}`, {
    runtime: 'local',
    op: 'exec',
    id,
  })
}
