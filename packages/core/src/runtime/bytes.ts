/**
 * Byte helpers for runtime adapters and their callers: a push-to-pull byte queue (the
 * shape of `ExecProcess.stdout`), any byte source as chunks, a web stream over an async
 * iterable, and a short command's whole output.
 */
import type { ExecProcess, ExecResult, StdinSource } from '../ports/container-runtime.js'

/** A push-to-pull byte queue: producers `push`, one consumer iterates. */
export interface ByteChannel extends AsyncIterable<Uint8Array> {
  push(chunk: Uint8Array): void
  /** No more chunks: the iteration ends after the buffered ones. */
  end(): void
}

/**
 * The stream shape {@link ExecProcess.stdout} uses, for adapter authors: unbounded buffer,
 * one consumer, ends after `end()`. With `onChunk`, chunks go to the callback instead.
 *
 * @example
 * ```ts
 * const out = byteChannel(); out.push(new TextEncoder().encode('hi')); out.end()
 * for await (const chunk of out) console.log(chunk)
 * ```
 */
export function byteChannel(onChunk?: (chunk: Uint8Array) => void): ByteChannel {
  const buffered: Uint8Array[] = []
  let ended = false
  let wake: (() => void) | null = null
  const notify = () => {
    const w = wake
    wake = null
    w?.()
  }
  return {
    push(chunk) {
      if (ended || chunk.length === 0) return
      if (onChunk) onChunk(chunk)
      else buffered.push(chunk)
      notify()
    },
    end() {
      ended = true
      notify()
    },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        const next = buffered.shift()
        if (next) {
          yield next
          continue
        }
        if (ended) return
        await new Promise<void>((resolve) => {
          wake = resolve
        })
      }
    },
  }
}

/**
 * Any {@link StdinSource} or {@link ByteSource} as an async iterable of byte chunks.
 *
 * @example
 * ```ts
 * for await (const chunk of toByteChunks('hello\n')) process.stdout.write(chunk)
 * ```
 */
export async function* toByteChunks(source: StdinSource): AsyncGenerator<Uint8Array> {
  const enc = new TextEncoder()
  if (typeof source === 'string') {
    yield enc.encode(source)
    return
  }
  if (source instanceof Uint8Array) {
    yield source
    return
  }
  for await (const chunk of source as AsyncIterable<string | Uint8Array>) {
    yield typeof chunk === 'string' ? enc.encode(chunk) : chunk
  }
}

/**
 * Read a command's whole output and wait for its end; handy for short commands.
 *
 * @example
 * ```ts
 * const { exitCode, stdout } = await collectExec(await rt.exec(id, { cmd: ['cat', '/etc/os-release'] }))
 * ```
 */
export async function collectExec(proc: ExecProcess): Promise<ExecResult & { stdout: string; stderr: string }> {
  const read = async (it: AsyncIterable<Uint8Array>) => {
    const chunks: Uint8Array[] = []
    for await (const c of it) chunks.push(c)
    return Buffer.concat(chunks).toString('utf8')
  }
  const [stdout, stderr, result] = await Promise.all([read(proc.stdout), read(proc.stderr), proc.exit])
  return { ...result, stdout, stderr }
}

/**
 * A web ReadableStream over any async iterable of bytes (a Node readable included), for
 * `getArchive` results. Node 20's `Readable.toWeb` is avoided: it throws on some stream
 * implementations (tar-stream's pack).
 *
 * @example
 * ```ts
 * return toWebStream(tarPack, () => tarPack.destroy())
 * ```
 */
export function toWebStream(source: AsyncIterable<Uint8Array>, onCancel?: () => void): ReadableStream<Uint8Array> {
  const it = source[Symbol.asyncIterator]()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { value, done } = await it.next()
        if (done) controller.close()
        else controller.enqueue(value instanceof Uint8Array ? value : new Uint8Array(value as ArrayBufferLike))
      } catch (err) {
        controller.error(err)
      }
    },
    async cancel() {
      onCancel?.()
      await it.return?.()
    },
  })
}
