import { forkTs, type Child } from './child.js'
import type { HostClosed, HostConfig, HostKind, HostReady } from './server-host.js'

export type { HostKind, HostReady, HostClosed } from './server-host.js'
export { RATE_LIMIT } from './server-host.js'

/** A server under test running in its own process. */
export interface Host extends HostReady {
  kind: HostKind
  body: Buffer
  /** Start sampling the server process's CPU. */
  measureStart(): void
  /** Stop sampling; the server process's CPU over the window, in cores. */
  measureEnd(): Promise<number>
  close(): Promise<HostClosed>
}

/**
 * Start a server under test (bench/lib/server-host.ts) in a child process.
 *
 * @example
 * ```ts
 * const berth = await startHost({ kind: 'memory' })
 * const bare = await startHost({ kind: 'bare', bodyBase64: berth.bodyBase64, contentType: berth.contentType })
 * ```
 */
export async function startHost(cfg: HostConfig, execArgv: string[] = []): Promise<Host> {
  const child: Child = forkTs('server-host.ts', execArgv)
  try {
    child.send(cfg)
    const ready = await child.next<HostReady>('ready', 60_000)
    return {
      ...ready,
      kind: cfg.kind,
      body: Buffer.from(ready.bodyBase64, 'base64'),
      measureStart: () => child.send({ type: 'measure-start' }),
      async measureEnd() {
        child.send({ type: 'measure-end' })
        return (await child.next<{ cores: number }>('cpu', 10_000)).cores
      },
      async close() {
        try {
          child.send({ type: 'close' })
          const closed = await child.next<HostClosed>('closed', 15_000)
          // Let the child exit on its own (it flushes a --cpu-prof profile on exit).
          await new Promise<void>((r) => {
            if (child.process.exitCode !== null) r()
            else child.process.once('exit', () => r())
            setTimeout(r, 5_000).unref()
          })
          return closed
        } finally {
          child.kill()
        }
      },
    }
  } catch (err) {
    child.kill()
    throw err
  }
}
