import { RunnerControl } from '@berth/contract'
import * as v from 'valibot'

type Decision = Extract<RunnerControl, { type: 'decision' }>

/**
 * What the server's control lines do to a run: decisions resolve the permission requests
 * waiting for them, messages queue for the agent's next turn boundary, an interrupt calls
 * the handler the run installed. Lines that are not a {@link RunnerControl} are reported
 * through `onError` and otherwise ignored: the run goes on.
 *
 * @example
 * ```ts
 * const steer = new Steering((m) => emit({ type: 'error', message: m }))
 * steer.line('{"type":"message","text":"Use pnpm, not npm"}')
 * await steer.takeMessage(never) // 'Use pnpm, not npm'
 * ```
 */
export class Steering {
  private readonly waiting = new Map<string, (d: Decision) => void>()
  private readonly messages: string[] = []
  private messageWaiter: (() => void) | null = null
  private interruptHandler: (() => void) | null = null
  /** True once an interrupt line came (also before a handler was installed). */
  interrupted = false

  constructor(private readonly onError: (message: string) => void) {}

  /** Read one control line. */
  line(text: string): void {
    if (!text.trim()) return
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (err) {
      this.onError(`control line is not JSON: ${(err as Error).message}`)
      return
    }
    const parsed = v.safeParse(RunnerControl, json)
    if (!parsed.success) {
      this.onError(`invalid control line: ${parsed.issues.map((i) => i.message).join('; ')}`)
      return
    }
    this.control(parsed.output)
  }

  /** Act on one control. */
  control(c: RunnerControl): void {
    if (c.type === 'decision') {
      const resolve = this.waiting.get(c.request_id)
      if (!resolve) {
        this.onError(`no open permission request ${c.request_id}`)
        return
      }
      this.waiting.delete(c.request_id)
      resolve(c)
    } else if (c.type === 'message') {
      if (!c.text.trim()) {
        this.onError('an empty message was not handed to the agent')
        return
      }
      this.messages.push(c.text)
      this.messageWaiter?.()
    } else {
      this.interrupted = true
      this.interruptHandler?.()
    }
  }

  /** Wait for the decision on `requestId`; settles with null when `signal` aborts first. */
  decision(requestId: string, signal: AbortSignal): Promise<Decision | null> {
    return new Promise((resolve) => {
      const onAbort = () => {
        this.waiting.delete(requestId)
        resolve(null)
      }
      if (signal.aborted) return onAbort()
      signal.addEventListener('abort', onAbort, { once: true })
      this.waiting.set(requestId, (d) => {
        signal.removeEventListener('abort', onAbort)
        resolve(d)
      })
    })
  }

  /** The next queued message, waiting for one; null once `until` settled (the run is over). */
  async takeMessage(until: Promise<unknown>): Promise<string | null> {
    let stop = false
    void until.then(() => {
      stop = true
      this.messageWaiter?.()
    })
    while (this.messages.length === 0 && !stop) {
      await new Promise<void>((r) => (this.messageWaiter = r))
      this.messageWaiter = null
    }
    return stop ? null : (this.messages.shift() ?? null)
  }

  /** Call `handler` on an interrupt line (at once if one already came). */
  onInterrupt(handler: () => void): void {
    this.interruptHandler = handler
    if (this.interrupted) handler()
  }
}
