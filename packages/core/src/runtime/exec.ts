/**
 * One exec lifecycle for every runtime adapter: the output channels, the `exit` promise
 * settled once, the abort signal, a watchdog on the container, stdin pumped with
 * backpressure and `kill`. An adapter supplies only how to reach its process.
 */
import type { ExecOptions, ExecProcess, ExecResult } from '../ports/container-runtime.js'
import { byteChannel, toByteChunks, type ByteChannel } from './bytes.js'
import type { ContainerError } from './errors.js'

/** How a command ended: a result, or the container's failure. */
export type ExecOutcome = { result: ExecResult } | { error: ContainerError }

/** The writable end a command's stdin goes to (a Node `Writable`: a socket, a pipe). */
export interface StdinSink {
  write(chunk: Uint8Array): boolean
  end(): void
  readonly destroyed: boolean
  once(event: 'drain' | 'close', listener: () => void): unknown
  off?(event: 'drain' | 'close', listener: () => void): unknown
}

/** What an adapter plugs into {@link execLifecycle}. */
export interface ExecHooks {
  /** Stop the command and its children; `exit` settles when its end is seen (or by `finish`). */
  kill(): Promise<void>
  /** Run when `exit` settles, before it resolves (close sockets, untrack the process). */
  cleanup?(outcome: ExecOutcome): void
}

/** The shared state of one running command, for its adapter. */
export interface ExecLifecycle {
  stdout: ByteChannel
  stderr: ByteChannel
  /** True once `exit` settled. */
  readonly settled: boolean
  /** True once `kill()` (or the abort signal) asked for the command's end. */
  readonly killed: boolean
  /** Settle `exit` (only the first call counts): end the output, stop the watchdog. */
  finish(outcome: ExecOutcome): void
  /**
   * Check the container every `intervalMs` while the command runs: `check` resolves a
   * failure to settle `exit` with, or nothing. One check at a time; the timer is unref'd.
   */
  watch(intervalMs: number, check: () => Promise<ContainerError | null | undefined>): void
  /** Pipe `options.stdin` to `sink` (with backpressure), then end it; a failing source ends it early. */
  pumpStdin(sink: StdinSink): void
  /** The {@link ExecProcess} to hand back. */
  process: ExecProcess
}

/**
 * Start the lifecycle of one command the adapter has started. An adapter checks
 * `options.signal` before it starts anything (and returns {@link abortedExec}); a signal
 * that fired while the command was being started (an engine round trip) kills it as soon
 * as the adapter has wired it up, in the same tick, so it still ends `killed`.
 *
 * @example
 * ```ts
 * if (opts.signal?.aborted) return abortedExec(opts)
 * const child = spawn(cmd, args)
 * const life = execLifecycle(opts, { kill: async () => killTree(child.pid) })
 * child.stdout.on('data', (c) => life.stdout.push(c))
 * child.on('close', (code) => life.finish({ result: { exitCode: code, killed: life.killed } }))
 * return life.process
 * ```
 */
export function execLifecycle(options: ExecOptions, hooks: ExecHooks): ExecLifecycle {
  const stdout = byteChannel(options.onStdout)
  const stderr = byteChannel(options.onStderr)
  let settled = false
  let killed = false
  let timer: NodeJS.Timeout | undefined
  let resolveExit!: (r: ExecResult) => void
  let rejectExit!: (e: ContainerError) => void
  const exit = new Promise<ExecResult>((resolve, reject) => {
    resolveExit = resolve
    rejectExit = reject
  })
  exit.catch(() => {}) // the caller awaits it; never an unhandled rejection

  const kill = async () => {
    if (settled) return
    killed = true
    await hooks.kill()
  }
  const onAbort = () => void kill()
  // Aborted while the adapter was starting it: kill once the adapter has wired its hooks
  // (it does so synchronously after this call), not before.
  if (options.signal?.aborted) queueMicrotask(onAbort)
  else options.signal?.addEventListener('abort', onAbort, { once: true })

  const finish = (outcome: ExecOutcome) => {
    if (settled) return
    settled = true
    clearInterval(timer)
    options.signal?.removeEventListener('abort', onAbort)
    hooks.cleanup?.(outcome)
    stdout.end()
    stderr.end()
    if ('error' in outcome) rejectExit(outcome.error)
    else resolveExit(outcome.result)
  }

  const watch = (intervalMs: number, check: () => Promise<ContainerError | null | undefined>) => {
    let checking = false
    timer = setInterval(() => {
      if (settled || checking) return
      checking = true
      check()
        .then((error) => {
          if (error) finish({ error })
        })
        .finally(() => {
          checking = false
        })
    }, intervalMs)
    timer.unref()
  }

  const pumpStdin = (sink: StdinSink) => {
    if (options.stdin === undefined) return
    const source = options.stdin
    void (async () => {
      try {
        for await (const chunk of toByteChunks(source)) {
          if (settled || sink.destroyed) break
          if (!sink.write(chunk)) await drained(sink)
        }
      } catch {
        // A failing stdin source just closes stdin early.
      } finally {
        if (!sink.destroyed) sink.end()
      }
    })()
  }

  return {
    stdout,
    stderr,
    get settled() {
      return settled
    },
    get killed() {
      return killed
    },
    finish,
    watch,
    pumpStdin,
    process: { stdout, stderr, exit, kill },
  }
}

/**
 * The process of a command whose abort signal fired before it started: no output,
 * `exit` resolves `killed`.
 *
 * @example
 * ```ts
 * if (opts.signal?.aborted) return abortedExec(opts) // nothing started
 * ```
 */
export function abortedExec(options: Pick<ExecOptions, 'onStdout' | 'onStderr'> = {}): ExecProcess {
  const stdout = byteChannel(options.onStdout)
  const stderr = byteChannel(options.onStderr)
  stdout.end()
  stderr.end()
  return { stdout, stderr, exit: Promise.resolve({ exitCode: null, killed: true }), kill: async () => {} }
}

function drained(sink: StdinSink): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      sink.off?.('drain', done)
      sink.off?.('close', done)
      resolve()
    }
    sink.once('drain', done)
    sink.once('close', done)
  })
}
