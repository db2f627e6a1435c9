/** The conformance suite's shared pieces: its options, the state its cases share, and small helpers. */
import { createServer } from 'node:net'
import {
  isContainerError,
  isFilePathError,
  type ContainerRuntime,
  type ContainerSpec,
  type ExecResult,
  type FilePathProblem,
  type Isolation,
  type RuntimeCapabilities,
} from '@berth/core'
import { expect } from 'vitest'

/** What the suite needs to know about one adapter beyond the runtime itself. */
export interface ConformanceOptions {
  /**
   * An image with `sh`, `cat`, `wc`, `cut`, `ls`, `touch`, `sleep`, `tr`, `grep`, `kill`,
   * `sha256sum` (the test image). Commands in the suite use paths relative to the working
   * directory `/workspace`, so runtimes without a filesystem namespace (`local`) pass too.
   */
  image: string
  /**
   * What the adapter must guarantee (Docker and Podman: `{ isolation: true, limits: true }`).
   * The suite checks the runtime declares exactly this, and holds it to it: a runtime cannot
   * skip the isolation or limit cases by declaring less.
   */
  capabilities: RuntimeCapabilities
  /** A runtime of the same adapter pointed at an engine that is not there (e.g. a missing socket). */
  makeUnreachable: () => ContainerRuntime | Promise<ContainerRuntime>
  /** Kill the container from outside the runtime (a raw engine client, a signal to its main process). */
  killFromOutside: (id: string) => Promise<void>
  /** Upper bound for "promptly" when a container dies mid-exec (default 10 s). */
  deathDetectionMs?: number
  /**
   * For runtimes with images: the suite then checks `ensureImage` (reuse, build from a
   * recipe with one build for concurrent callers, rebuild on a new recipe, a clear
   * failure) with a tiny recipe made of the host's static busybox, under names on a
   * local port where no registry listens. `removeImage` cleans up from outside.
   */
  images?: { removeImage: (ref: string) => Promise<void> }
  /**
   * Run every container of the suite at this isolation level (default the runtime's own,
   * `container`). With `gvisor` the suite also checks that `isolations()` offers it and that
   * the commands meet gVisor's kernel, not the host's.
   */
  isolation?: Isolation
}

/** A local TCP port nothing listens on (taken, then released). */
export async function closedPort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const { port } = srv.address() as { port: number }
  await new Promise<void>((r) => srv.close(() => r()))
  return port
}

export const MiB = 1024 * 1024

export async function expectContainerFailure(p: Promise<unknown>, reason?: string): Promise<Record<string, unknown>> {
  const err = await p.then(
    () => {
      throw new Error('expected CONTAINER_FAILED, but the operation succeeded')
    },
    (e: unknown) => e,
  )
  if (!isContainerError(err)) throw err
  expect(err.status).toBe(502)
  if (reason) expect(err.details?.reason).toBe(reason)
  return err.details ?? {}
}

export function text(chunks: Uint8Array[]): string {
  return Buffer.concat(chunks).toString('utf8')
}

/** What every case of one suite run shares. `rt` and `shared` are set in `beforeAll`. */
export interface Suite {
  /** The adapter's name, as given to the suite. */
  name: string
  opts: ConformanceOptions
  /** Labels every container of this run carries (a unique `berth.test.run`). */
  run: string
  runLabels: Record<string, string>
  rt: ContainerRuntime
  /** One running container the exec cases share. */
  shared: string
  /** Images the image cases built, removed after the run. */
  builtImages: string[]
  /** Create (and start, unless `start` is false) a container of this run, working directory `/workspace`. */
  make(spec?: Partial<ContainerSpec>, start?: boolean): Promise<string>
  /** Run `sh -c script` and collect its output. */
  sh(
    id: string,
    script: string,
    extra?: Partial<Parameters<ContainerRuntime['exec']>[1]>,
  ): Promise<ExecResult & { stdout: string; stderr: string }>
}

/** Expect a file operation to refuse a path with `problem`; resolves the error's details. */
export async function expectPathProblem(
  p: Promise<unknown>,
  problem: FilePathProblem,
): Promise<Record<string, unknown>> {
  const err = await p.then(
    () => {
      throw new Error(`expected a ${problem} path error, but the operation succeeded`)
    },
    (e: unknown) => e,
  )
  if (!isFilePathError(err)) throw err
  expect(err.status).toBe(400)
  expect(err.details?.reason).toBe(problem)
  return err.details ?? {}
}
