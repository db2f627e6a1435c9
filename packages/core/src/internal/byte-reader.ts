/**
 * Pull-style reading of a byte stream: exact-length reads and bounded pass-through, with
 * at most one source chunk held beyond what was asked for. Shared by the tar and
 * multipart readers.
 *
 * @example
 * ```ts
 * const reader = new ByteReader(stream)
 * const header = await reader.read(512) // null at a clean end
 * for await (const chunk of reader.take(size)) sink.write(chunk)
 * ```
 */
export class ByteReader {
  private readonly it: AsyncIterator<Uint8Array>
  private head: Uint8Array = new Uint8Array(0)
  private done = false

  constructor(source: AsyncIterable<Uint8Array>) {
    this.it = source[Symbol.asyncIterator]()
  }

  /** Whether more bytes may come (buffered or from the source). */
  async more(): Promise<boolean> {
    while (this.head.length === 0 && !this.done) await this.fill()
    return this.head.length > 0
  }

  private async fill(): Promise<void> {
    const { done, value } = await this.it.next()
    if (done) {
      this.done = true
      return
    }
    if (value.length === 0) return
    this.head = this.head.length ? concat([this.head, value]) : value
  }

  /** What is buffered now, reading one more chunk first when nothing is. */
  async peek(): Promise<Uint8Array> {
    if (this.head.length === 0 && !this.done) await this.more()
    return this.head
  }

  /** Buffer at least `n` bytes when the stream has them; returns what is buffered. */
  async ensure(n: number): Promise<Uint8Array> {
    while (this.head.length < n && !this.done) await this.fill()
    return this.head
  }

  /** Drop `n` buffered bytes. */
  skip(n: number): void {
    this.head = this.head.subarray(n)
  }

  /** Exactly `n` bytes; `null` at a clean end of stream; throws when it ends mid-way. */
  async read(n: number): Promise<Uint8Array | null> {
    const buf = await this.ensure(n)
    if (buf.length === 0 && n > 0) return null
    if (buf.length < n) throw new Error(`stream ended ${n - buf.length} bytes early`)
    const out = buf.slice(0, n)
    this.skip(n)
    return out
  }

  /** The next `n` bytes as they arrive, without collecting them; throws when the stream ends first. */
  async *take(n: number): AsyncGenerator<Uint8Array> {
    let left = n
    while (left > 0) {
      if (!(await this.more())) throw new Error(`stream ended ${left} bytes early`)
      const part = this.head.subarray(0, left)
      this.skip(part.length)
      left -= part.length
      yield part
    }
  }

  /** Stop reading the source (cleanup: a source that fails to stop is not an error here). */
  async cancel(): Promise<void> {
    this.done = true
    await this.it.return?.()?.catch(() => {})
  }
}

/**
 * Concatenate byte arrays.
 *
 * @example
 * ```ts
 * concat([new Uint8Array([1]), new Uint8Array([2, 3])]) // Uint8Array [1, 2, 3]
 * ```
 */
export function concat(parts: Uint8Array[]): Uint8Array {
  let size = 0
  for (const p of parts) size += p.length
  const out = new Uint8Array(size)
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}
