/** Warm agents over a fake pool and runtime: what they park, when they refill, which they hand out, and when idle ones go. */
import type { RunnerInput } from '@berth/contract'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { ContainerRuntime, ExecOptions, ExecProcess } from '../src/ports/container-runtime.js'
import type { ContainerPool, Lease } from '../src/runtime/index.js'
import { warmKey } from '../src/tasks/agent-process.js'
import { holdsCredential, WarmAgents } from '../src/tasks/warm-agents.js'
import { quietLogger } from './task-fakes.js'

const input = {
  protocol: 1,
  task_id: 'task_1',
  prompt: 'hi',
  model: { provider: 'anthropic', model: 'claude-sonnet-4-5', base_url: null, api_key: null },
  env: { API_TOKEN: 'berth_brokered_secret_1' },
  redact: [],
  events_file: '/workspace/.berth/events/task_1.jsonl',
} as unknown as RunnerInput

/** A pool with `room` places and a runtime whose runners never exit; each claim's lease is recorded. */
function fakes(room: number) {
  const leases: (Lease & { release: ReturnType<typeof vi.fn> })[] = []
  const stderr: ((chunk: Uint8Array) => void)[] = []
  const pool = {
    room: () => room,
    claim: vi.fn(async () => {
      const lease = {
        container: { id: `ctr_${leases.length}`, engine_id: `e${leases.length}` },
        release: vi.fn(async () => {}),
      }
      leases.push(lease as never)
      return lease
    }),
  } as unknown as ContainerPool
  const runtime = {
    capabilities: {},
    exec: vi.fn(async (_id: string, o: ExecOptions): Promise<ExecProcess> => {
      stderr.push(o.onStderr!)
      return {
        stdout: (async function* () {})(),
        stderr: (async function* () {})(),
        exit: new Promise(() => {}),
        kill: vi.fn(),
      }
    }),
  } as unknown as ContainerRuntime
  const agents = new WarmAgents({
    runtime,
    pool,
    command: ['node', 'main.js'],
    logger: quietLogger,
    max: 4,
    idleMs: 60_000,
    cwd: '/workspace',
  })
  /** The nth agent's runner says Claude Code is up. */
  const ready = (n: number) => stderr[n]!(new TextEncoder().encode('{"warm":"ready"}\n'))
  return { pool, runtime, agents, leases, ready }
}

afterEach(() => vi.useRealTimers())

describe('warm agents', () => {
  it('hold no credential: an input carrying a value the runner would redact, the model key, an env secret or Git tokens parks none', () => {
    expect(holdsCredential(input)).toBe(false)
    expect(holdsCredential({ ...input, env: { PLAIN: 'env-value' } })).toBe(true)
    expect(holdsCredential({ ...input, redact: ['mcp-header-value'] })).toBe(true)
    expect(holdsCredential({ ...input, model: { ...input.model, api_key: 'sk-ant-x' } })).toBe(true)
    expect(holdsCredential({ ...input, git_credentials: [{ host: 'git.test', username: 'u', token: 't' }] })).toBe(true)

    const f = fakes(10)
    f.agents.prepare('usr_1', { ...input, env: { PLAIN: 'env-value' } })
    expect(f.pool.claim).not.toHaveBeenCalled()
    expect(f.agents.stats()).toEqual({ parked: 0, ready: 0, starting: 0 })
  })

  it('start a replacement at once while the pool has room for it and one more (an idle container or a creation), and not otherwise', async () => {
    const full = fakes(1)
    full.agents.prepare('usr_1', input)
    expect(full.pool.claim).not.toHaveBeenCalled()

    const f = fakes(2)
    f.agents.prepare('usr_1', input)
    expect(f.pool.claim).toHaveBeenCalledTimes(1)
    await vi.waitFor(() => expect(f.agents.stats().parked).toBe(1))
  })

  it('hand out a ready agent of the key, the newest first, so the ones a steady caller does not need idle out', async () => {
    const f = fakes(10)
    for (let i = 0; i < 3; i++) f.agents.prepare('usr_1', input)
    await vi.waitFor(() => expect(f.agents.stats().parked).toBe(3))
    f.ready(0)
    f.ready(1)
    expect(f.agents.take(warmKey('usr_2', input))).toBeNull()
    expect(f.agents.take(warmKey('usr_1', input))?.lease.container.id).toBe('ctr_1')
    expect(f.agents.take(warmKey('usr_1', input))?.lease.container.id).toBe('ctr_0')
    // None ready left: a starting one is still better than a cold run.
    expect(f.agents.take(warmKey('usr_1', input))?.lease.container.id).toBe('ctr_2')
  })

  it('hand a task an agent still starting for its key (a burst before the refill was up) rather than run it cold', async () => {
    const f = fakes(10)
    f.agents.prepare('usr_1', input)
    expect(f.agents.take(warmKey('usr_1', input))).toBeNull()
    expect(await f.agents.takeOrWait(warmKey('usr_2', input))).toBeNull()
    expect((await f.agents.takeOrWait(warmKey('usr_1', input)))?.lease.container.id).toBe('ctr_0')
    expect(await f.agents.takeOrWait(warmKey('usr_1', input))).toBeNull()
  })

  it('give a parked agent’s container back once no task took it for `idleMs`, and keep one a task took', async () => {
    vi.useFakeTimers()
    const f = fakes(10)
    f.agents.prepare('usr_1', input)
    f.agents.prepare('usr_1', input)
    await vi.waitFor(() => expect(f.agents.stats().parked).toBe(2))
    const taken = f.agents.take(warmKey('usr_1', input))!
    vi.advanceTimersByTime(59_000)
    expect(f.leases.map((l) => l.release.mock.calls.length)).toEqual([0, 0])
    vi.advanceTimersByTime(1_000)
    expect(f.agents.stats().parked).toBe(0)
    const idle = f.leases.find((l) => l !== taken.lease)!
    expect(idle.release).toHaveBeenCalledTimes(1)
    expect(taken.lease.release).not.toHaveBeenCalled()
  })

  it('on close, wait for an agent still starting and give its container back before resolving', async () => {
    const f = fakes(10)
    let execStarted!: () => void
    const started = new Promise<void>((r) => (execStarted = r))
    let finishExec!: () => void
    const exec = f.runtime.exec as ReturnType<typeof vi.fn>
    const inner = exec.getMockImplementation() as (id: string, o: ExecOptions) => Promise<ExecProcess>
    exec.mockImplementationOnce(async (id: string, o: ExecOptions) => {
      execStarted()
      await new Promise<void>((r) => (finishExec = r))
      return inner(id, o)
    })
    f.agents.prepare('usr_1', input)
    await started
    let closed = false
    const closing = f.agents.close().then(() => (closed = true))
    await new Promise((r) => setTimeout(r, 20))
    expect(closed, 'close waits for the start under way').toBe(false)
    finishExec()
    await closing
    expect(f.leases[0]!.release).toHaveBeenCalledTimes(1)
    expect(f.agents.stats().parked).toBe(0)
  })

  it('hold a refill until its task calls it (its first token), and start it once', async () => {
    const f = fakes(10)
    const start = f.agents.refill('usr_1', input)
    expect(f.pool.claim).not.toHaveBeenCalled()
    expect(f.agents.stats()).toEqual({ parked: 0, ready: 0, starting: 0 })
    start()
    start()
    expect(f.pool.claim).toHaveBeenCalledTimes(1)
    await vi.waitFor(() => expect(f.agents.stats().parked).toBe(1))
  })

  it('start a held refill for a task of its key that finds none parked (a burst), and hand it that agent', async () => {
    const f = fakes(10)
    f.agents.refill('usr_1', input)
    expect(await f.agents.takeOrWait(warmKey('usr_2', input))).toBeNull()
    expect(f.pool.claim).not.toHaveBeenCalled()
    expect((await f.agents.takeOrWait(warmKey('usr_1', input)))?.lease.container.id).toBe('ctr_0')
  })

  it('refill with two after a task found its key’s agents not up yet (tasks back to back), with one otherwise', async () => {
    const f = fakes(10)
    const key = warmKey('usr_1', input)
    // A first task of the key finds nothing at all: one refill.
    expect(await f.agents.takeOrWait(key)).toBeNull()
    f.agents.refill('usr_1', input)()
    expect(f.pool.claim).toHaveBeenCalledTimes(1)
    // The next takes that agent before it is up: its refill starts two.
    await vi.waitFor(() => expect(f.agents.stats().parked).toBe(1))
    expect(await f.agents.takeOrWait(key)).not.toBeNull()
    f.agents.refill('usr_1', input)()
    expect(f.pool.claim).toHaveBeenCalledTimes(3)
    await vi.waitFor(() => expect(f.agents.stats().parked).toBe(2))
    // One of them is up when the next task comes: back to one refill.
    f.ready(1)
    expect(await f.agents.takeOrWait(key)).not.toBeNull()
    f.agents.refill('usr_1', input)()
    expect(f.pool.claim).toHaveBeenCalledTimes(4)
  })
})
