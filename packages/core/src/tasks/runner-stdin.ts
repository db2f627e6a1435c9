/** A runner's stdin kept open for the run: its first line, then control lines, closed when the run ends. */
import type { RunnerControl } from '@berth/contract'

/**
 * The lines a runner reads on stdin, as an async iterable for the runtime's `exec`: lines
 * written before the runner reads them wait in order; after {@link RunnerStdin.close} the
 * iteration ends (stdin closes) and later writes are dropped, since a runner that wrote
 * its result reads nothing more.
 *
 * @example
 * ```ts
 * const stdin = new RunnerStdin()
 * stdin.line(JSON.stringify(input))
 * await runtime.exec(id, { cmd, stdin: stdin.lines() })
 * stdin.send({ type: 'interrupt' })
 * stdin.close()
 * ```
 */
export class RunnerStdin {
  private readonly queued: Promise<string>[] = []
  private wake: (() => void) | null = null
  private closed = false

  /** Whether {@link RunnerStdin.close} was called. */
  get isClosed(): boolean {
    return this.closed
  }

  /**
   * Queue one raw line (a newline is added); false once closed. A line still being made
   * (a promise) keeps its place: the lines after it wait for it.
   */
  line(text: string | Promise<string>): boolean {
    if (this.closed) return false
    this.queued.push(Promise.resolve(text).then((t) => `${t}\n`))
    this.notify()
    return true
  }

  /** Queue a control line for the runner; false once closed (the run has ended). */
  send(control: RunnerControl): boolean {
    return this.line(JSON.stringify(control))
  }

  /** End stdin after the lines already queued. */
  close(): void {
    this.closed = true
    this.notify()
  }

  /** The lines as the runtime pipes them, ending once closed and drained. */
  async *lines(): AsyncGenerator<string> {
    for (;;) {
      while (this.queued.length) yield await this.queued.shift()!
      if (this.closed) return
      await new Promise<void>((r) => (this.wake = r))
    }
  }

  private notify(): void {
    const wake = this.wake
    this.wake = null
    wake?.()
  }
}
