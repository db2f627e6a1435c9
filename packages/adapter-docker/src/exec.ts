import { randomUUID } from 'node:crypto'
import type { Duplex } from 'node:stream'
import { ContainerError, abortedExec, execLifecycle, type ExecOptions, type ExecProcess } from '@berth/core'
import type Docker from 'dockerode'
import type { EngineContext } from './context.js'
import { createDemuxer } from './internal/demux.js'

/** Env var that marks every process of one exec, so `kill()` can find them from inside the container. */
export const EXEC_MARKER_ENV = 'BERTH_EXEC_ID'

/**
 * Kills every process whose environment carries the marker `$1` (the exec), and every
 * process below one of those (its children, theirs...). A process of another user (the
 * agent a root runner starts as the container's user, and its tools) keeps the marker but
 * hides its environment from root without CAP_SYS_PTRACE: it is found as a descendant,
 * from `/proc/<pid>/stat`, which anyone may read. The Engine API has no "kill exec"; this
 * runs as a second exec and needs only `sh`, `tr`, `grep` and `kill` in the image (busybox
 * or coreutils). Each round stops what it found before killing it, so a parent cannot run
 * on when its child dies first (`/proc` lists in no useful order), and rounds repeat until
 * none is left (a process forked while a round was listing is found by the next).
 */
const KILL_SCRIPT = [
  'marker=$1',
  'for round in 1 2 3 4 5 6 7 8 9 10; do',
  '  pids= tree=',
  '  for d in /proc/[0-9]*; do',
  `    p=\${d#/proc/}`,
  `    if tr '\\0' '\\n' < "$d/environ" 2>/dev/null | grep -qx "${EXEC_MARKER_ENV}=$marker"; then pids="$pids $p"; fi`,
  '    { read -r stat < "$d/stat"; } 2>/dev/null || continue',
  `    stat=\${stat##*) }; stat=\${stat#* }`,
  `    tree="$tree $p:\${stat%% *}"`,
  '  done',
  '  [ -z "$pids" ] && exit 0',
  '  more=1',
  '  while [ -n "$more" ]; do',
  '    more=',
  '    for e in $tree; do',
  `      case " $pids " in *" \${e%%:*} "*) continue ;; esac`,
  `      case " $pids " in *" \${e#*:} "*) pids="$pids \${e%%:*}"; more=1 ;; esac`,
  '    done',
  '  done',
  '  kill -STOP $pids 2>/dev/null; kill -9 $pids 2>/dev/null',
  'done; exit 0',
].join('\n')

/** How long a command that ended by SIGKILL waits to see whether its container is dying. */
const DEATH_SETTLE_MS = 1000
/** Give up waiting for a killed command's stream to end after this long. */
const KILL_GRACE_MS = 5000
/** How long a kill waits for a command that is still starting to run. */
const START_WAIT_MS = 2000
/** A watchdog inspect slower than this counts as a miss; two misses: engine unreachable. */
const WATCH_TIMEOUT_MS = 5000

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error(`no answer in ${ms} ms`), { code: 'ETIMEDOUT' })), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

/**
 * Run a command in a running container over the Engine API: a hijacked, multiplexed
 * attach stream carries stdin/stdout/stderr; the exit code comes from exec inspect. While
 * it runs, a watchdog inspects the container every `ctx.watchIntervalMs`, so a container
 * killed from outside (or an engine that goes away) rejects `exit` with CONTAINER_FAILED
 * instead of leaving it hanging.
 *
 * @example
 * ```ts
 * const proc = await startExec(ctx, id, { cmd: ['sh', '-c', 'echo hi'] })
 * for await (const chunk of proc.stdout) process.stdout.write(chunk)
 * const { exitCode } = await proc.exit
 * ```
 */
export async function startExec(ctx: EngineContext, id: string, opts: ExecOptions): Promise<ExecProcess> {
  if (opts.signal?.aborted) return abortedExec(opts)
  const container = ctx.docker.getContainer(id)
  const marker = randomUUID()
  const hasStdin = opts.stdin !== undefined
  const env = Object.entries({ ...opts.env, [EXEC_MARKER_ENV]: marker }).map(([k, v]) => `${k}=${v}`)
  let exec: Docker.Exec
  let sock: Duplex
  try {
    exec = await container.exec({
      Cmd: [...opts.cmd],
      Env: env,
      WorkingDir: opts.cwd,
      User: opts.user,
      AttachStdin: hasStdin,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
    })
    sock = (await exec.start({ hijack: true, stdin: hasStdin })) as Duplex
  } catch (err) {
    throw ctx.error(err, 'exec', { id, cmd: opts.cmd[0] })
  }

  const died = (state: Docker.ContainerInspectInfo['State'] | null, why: string) =>
    new ContainerError('died', `${ctx.name} container ${id} ${why} while running ${opts.cmd[0]}`, {
      runtime: ctx.name,
      op: 'exec',
      endpoint: ctx.endpoint,
      id,
      ...(state ? { state: state.Status, exitCode: state.ExitCode, oomKilled: state.OOMKilled } : {}),
    })
  const asDeath = (err: unknown) => {
    const mapped = ctx.error(err, 'exec', { id })
    return mapped.reason === 'not_found' ? died(null, 'was removed') : mapped
  }

  const life = execLifecycle(opts, {
    // The Engine API has no "kill exec": a second exec kills every process carrying the marker.
    async kill() {
      try {
        // The start answer can come before the command's process exists (an abort that
        // landed during the start): the kill script would find nothing. Wait until the
        // engine reports it running, or ended.
        for (let i = 0; i < START_WAIT_MS / 25; i++) {
          const e = await exec.inspect()
          if (e.Running && e.Pid) break
          if (!e.Running && e.ExitCode !== null && e.ExitCode !== undefined) return
          await sleep(25)
        }
        const killer = await container.exec({
          Cmd: ['/bin/sh', '-c', KILL_SCRIPT, 'berth-kill', marker],
          User: opts.user,
          AttachStdout: true,
          AttachStderr: true,
        })
        const ks = (await killer.start({ hijack: true, stdin: false })) as Duplex
        await new Promise<void>((resolve) => {
          ks.on('end', resolve).on('close', resolve).on('error', resolve).resume()
        })
      } catch {
        // The container may be gone already; the watchdog or the stream end settles `exit`.
      }
      setTimeout(() => {
        if (life.settled) return
        sock.destroy()
        life.finish({ result: { exitCode: null, killed: true } })
      }, KILL_GRACE_MS).unref()
    },
    cleanup(outcome) {
      if ('error' in outcome) sock.destroy()
    },
  })

  sock.on(
    'data',
    createDemuxer((kind, payload) => (kind === 'stderr' ? life.stderr : life.stdout).push(payload)),
  )
  let streamEnded = false
  const onStreamEnd = () => {
    if (streamEnded) return
    streamEnded = true
    void (async () => {
      try {
        const info = await container.inspect()
        if (!info.State.Running) return life.finish({ error: died(info.State, 'died') })
        let exitCode: number | null = null
        for (let i = 0; i < 80 && !life.settled; i++) {
          const e = await exec.inspect()
          if (!e.Running) {
            exitCode = e.ExitCode ?? null
            break
          }
          await sleep(25)
        }
        // A container killed from outside SIGKILLs its execs before the engine reports it
        // dead, so a SIGKILL-shaped end that we did not cause gets a closer look.
        if (!life.killed && (exitCode === null || exitCode === 137)) {
          for (let waited = 0; waited < DEATH_SETTLE_MS && !life.settled; waited += 50) {
            await sleep(50)
            const again = await container.inspect()
            if (!again.State.Running) return life.finish({ error: died(again.State, 'died') })
          }
        }
        life.finish({ result: { exitCode, killed: life.killed } })
      } catch (err) {
        life.finish({ error: asDeath(err) })
      }
    })()
  }
  sock.on('end', onStreamEnd)
  sock.on('close', onStreamEnd)
  sock.on('error', onStreamEnd)

  let misses = 0
  life.watch(ctx.watchIntervalMs, async () => {
    try {
      const info = await withTimeout(container.inspect(), WATCH_TIMEOUT_MS)
      misses = 0
      return info.State.Running ? null : died(info.State, 'died')
    } catch (err) {
      if ((err as { code?: string }).code === 'ETIMEDOUT' && ++misses < 2) return null
      return asDeath(err)
    }
  })
  life.pumpStdin(sock)
  return life.process
}
