/** The runner session over a fake runtime: events in order ending on the result, the failures it reports, the kills; and the line framer. */
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { ContainerRuntime, ExecOptions, ExecProcess, ExecResult } from '../src/ports/container-runtime.js'
import type { RunnerEvent, RunnerInput } from '@berth/contract'
import { lineFramer } from '../src/tasks/runner-lines.js'
import { runnerEvents } from '../src/tasks/runner-session.js'
import { quietLogger } from './task-fakes.js'

const encode = (s: string) => new TextEncoder().encode(s)
const line = (e: object) => `${JSON.stringify(e)}\n`
const result = {
  type: 'result',
  outcome: 'success',
  text: 'done',
  tool_calls: [],
  input_tokens: 1,
  output_tokens: 2,
  cost_usd: 0,
  turns: 1,
  session_id: null,
  error: null,
}
const input = {
  task_id: 'task_1',
  prompt: 'hi',
  events_file: '/workspace/.berth/events/task_1.jsonl',
  redact: ['s3cret-value'],
} as unknown as RunnerInput

/** A runtime whose one exec the test drives: write stdout/stderr, exit, and see kills. */
function fakeRuntime() {
  let opts!: ExecOptions
  let exit!: (r: ExecResult) => void
  const kill = vi.fn(async () => exit({ exitCode: null, killed: true }))
  const proc: ExecProcess = {
    // Output goes to the callbacks: the streams yield nothing.
    stdout: (async function* () {})(),
    stderr: (async function* () {})(),
    exit: new Promise<ExecResult>((r) => (exit = r)),
    kill,
  }
  const runtime = {
    exec: vi.fn(async (_id: string, o: ExecOptions) => {
      opts = o
      o.signal?.addEventListener('abort', () => void kill(), { once: true })
      return proc
    }),
  } as unknown as ContainerRuntime
  return {
    runtime,
    kill,
    out: (s: string) => opts.onStdout!(encode(s)),
    err: (s: string) => opts.onStderr!(encode(s)),
    exit: (exitCode: number) => exit({ exitCode, killed: false }),
    started: () => runtime.exec,
  }
}

function session(rt: ReturnType<typeof fakeRuntime>, signal = new AbortController().signal) {
  return runnerEvents(
    { runtime: rt.runtime, command: ['berth-runner'], logger: quietLogger },
    { engineId: 'c1', taskId: 'task_1', input, signal, agent: null },
  )
}

/** Iterate in the background, keeping what came and how it ended. */
function consume(s: AsyncIterable<RunnerEvent>) {
  const seen: RunnerEvent['type'][] = []
  const done = (async () => {
    for await (const e of s) seen.push(e.type)
  })()
  return { seen, done }
}

afterEach(() => {
  vi.useRealTimers()
})

describe('runnerEvents', () => {
  it('yields the runner’s events in order, split anywhere, and ends on the result', async () => {
    const rt = fakeRuntime()
    const s = session(rt)
    const c = consume(s)
    await vi.waitFor(() => expect(rt.runtime.exec).toHaveBeenCalledOnce())
    const text = `${line({ type: 'turn_start', turn: 1 })}\n${line({ type: 'token', text: 'Hi' })}${line(result)}${line({ type: 'token', text: 'late' })}`
    // In three uneven pieces: a line cut in the middle comes out whole.
    rt.out(text.slice(0, 7))
    rt.out(text.slice(7, 40))
    rt.out(text.slice(40))
    await c.done
    expect(c.seen).toEqual(['turn_start', 'token', 'result'])
    rt.exit(0)
    await s.exited
  })

  it('starts the runner before its events are read, and keeps what it wrote meanwhile', async () => {
    const rt = fakeRuntime()
    const s = session(rt)
    // Nothing reads yet: the exec is under way all the same (the caller writes `running` meanwhile).
    await vi.waitFor(() => expect(rt.runtime.exec).toHaveBeenCalledOnce())
    rt.out(line({ type: 'turn_start', turn: 1 }) + line(result))
    const c = consume(s)
    await c.done
    expect(c.seen).toEqual(['turn_start', 'result'])
    rt.exit(0)
    await s.exited
  })

  it('close() kills a runner whose events were never read, and is a no-op once they were', async () => {
    const rt = fakeRuntime()
    session(rt).close()
    await vi.waitFor(() => expect(rt.kill).toHaveBeenCalledOnce())

    const read = fakeRuntime()
    const s = session(read)
    const c = consume(s)
    await vi.waitFor(() => expect(read.runtime.exec).toHaveBeenCalledOnce())
    read.out(line(result))
    await c.done
    s.close()
    read.exit(0)
    await s.exited
    expect(read.kill).not.toHaveBeenCalled()
  })

  it('fails CONTAINER_FAILED with the redacted stderr tail when the runner ends without a result', async () => {
    const rt = fakeRuntime()
    const c = consume(session(rt))
    await vi.waitFor(() => expect(rt.runtime.exec).toHaveBeenCalledOnce())
    rt.out(line({ type: 'token', text: 'Hi' }))
    rt.err('boom: s3cret-value leaked\n')
    rt.exit(3)
    const err = await c.done.catch((e: unknown) => e)
    expect(err).toMatchObject({ code: 'CONTAINER_FAILED', details: { exit_code: 3 } })
    const tail = (err as { details: { stderr_tail: string } }).details.stderr_tail
    expect(tail).toContain('boom')
    expect(tail).not.toContain('s3cret-value')
    expect(c.seen).toEqual(['token'])
  })

  it.each([
    ['a line that is not JSON', 'not json\n'],
    ['an unknown event', line({ type: 'forged', text: 'x' })],
    ['a line over', `${'x'.repeat(17 * 1024 * 1024)}\n`],
  ])(
    'ends the run CONTAINER_FAILED and kills the runner when it writes %s, ignoring what follows',
    async (what, bad) => {
      const rt = fakeRuntime()
      const c = consume(session(rt))
      await vi.waitFor(() => expect(rt.runtime.exec).toHaveBeenCalledOnce())
      rt.out(line({ type: 'token', text: 'Hi' }))
      rt.out(bad)
      rt.out(line(result))
      const err = await c.done.catch((e: unknown) => e)
      expect(err).toMatchObject({ code: 'CONTAINER_FAILED' })
      expect((err as Error).message).toContain(`broke its protocol: ${what}`)
      expect(c.seen).toEqual(['token'])
      expect(rt.kill).toHaveBeenCalled()
    },
  )

  it('kills a runner that hangs after its result once the grace period is over', async () => {
    vi.useFakeTimers()
    const rt = fakeRuntime()
    const s = session(rt)
    const c = consume(s)
    await vi.advanceTimersByTimeAsync(0)
    rt.out(line(result))
    await c.done
    await vi.advanceTimersByTimeAsync(9_000)
    expect(rt.kill).not.toHaveBeenCalled()
    await vi.advanceTimersByTimeAsync(1_000)
    expect(rt.kill).toHaveBeenCalledOnce()
    await s.exited
  })

  it('an abort kills the runner and ends the iteration with its reason', async () => {
    const rt = fakeRuntime()
    const abort = new AbortController()
    const c = consume(session(rt, abort.signal))
    await vi.waitFor(() => expect(rt.runtime.exec).toHaveBeenCalledOnce())
    rt.out(line({ type: 'token', text: 'Hi' }))
    const reason = new Error('cancelled')
    abort.abort(reason)
    await expect(c.done).rejects.toBe(reason)
    expect(rt.kill).toHaveBeenCalled()
  })
})

describe('lineFramer', () => {
  it('frames lines across chunks and hands the rest on end', () => {
    const lines: string[] = []
    const f = lineFramer((l) => lines.push(l))
    f.push(encode('a\nb'))
    f.push(encode('c\n\nd'))
    f.end()
    expect(lines).toEqual(['a', 'bc', '', 'd'])
  })

  it('keeps multi-byte characters cut between chunks whole', () => {
    const lines: string[] = []
    const f = lineFramer((l) => lines.push(l))
    const bytes = encode('héllo\n')
    f.push(bytes.slice(0, 2))
    f.push(bytes.slice(2))
    expect(lines).toEqual(['héllo'])
  })

  it('drops a line longer than the cap up to its newline, says so, and goes on with the next', () => {
    const lines: string[] = []
    const oversize = vi.fn()
    const f = lineFramer((l) => lines.push(l), { maxChars: 10, onOversize: oversize })
    f.push(encode('short\n0123456'))
    f.push(encode('789abcdef'))
    f.push(encode('ghij\nnext\n'))
    f.push(encode('0123456789abc\nlast'))
    f.end()
    expect(lines).toEqual(['short', 'next', 'last'])
    expect(oversize.mock.calls.map((c) => c[0])).toEqual([20, 13])
  })

  it('scans each character once however long a line grows', () => {
    const f = lineFramer(() => {})
    const spy = vi.spyOn(String.prototype, 'indexOf')
    for (let i = 0; i < 200; i++) f.push(encode('x'.repeat(1000)))
    // Each push looks for a newline from where the last one stopped: one search per push.
    const scanned = spy.mock.calls.filter((c) => c[0] === '\n').map((c) => c[1] as number)
    spy.mockRestore()
    expect(scanned).toHaveLength(200)
    expect(scanned.at(-1)).toBe(199 * 1000)
  })
})
