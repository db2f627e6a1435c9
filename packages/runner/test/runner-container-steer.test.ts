import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { podmanRuntime } from '@berth/adapter-podman'
import type { RunnerEvent } from '@berth/contract'
import { IDLE_COMMAND, type ContainerRuntime } from '@berth/core'
import { ensureEngines } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RUNNER_MOUNT, runnerCommand } from '../src/bundle.js'
import { BUNDLE_DIR, makeInput, type Result } from './helpers.js'

/** A stdin that stays open: the input line first, then whatever `push` adds, until `end`. */
function openStdin(first: string) {
  const queue: string[] = [`${first}\n`]
  let wake: (() => void) | null = null
  let ended = false
  return {
    push: (line: unknown) => {
      queue.push(`${JSON.stringify(line)}\n`)
      wake?.()
    },
    end: () => {
      ended = true
      wake?.()
    },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        while (queue.length) yield queue.shift()!
        if (ended) return
        await new Promise<void>((r) => (wake = r))
        wake = null
      }
    },
  }
}

// Steering where the runner really runs: in a Podman container, stdin an open exec stream
// carrying control lines as the server writes them.
describe('berth-runner steering inside a Podman container', () => {
  const labels = { 'berth.test.run': `runner-steer-${process.pid}` }
  let rt: ContainerRuntime
  let id: string
  const workspace = mkdtempSync(join(tmpdir(), 'berth-runner-steer-ws-'))

  beforeAll(async () => {
    const [podman] = ensureEngines(['podman'])
    rt = podmanRuntime({ socketPath: podman!.socketPath })
    await rt.ping()
    ;({ id } = await rt.create({
      image: podman!.image,
      cmd: [...IDLE_COMMAND],
      workingDir: '/workspace',
      network: 'none',
      labels,
      mounts: [
        { type: 'bind', source: BUNDLE_DIR, target: RUNNER_MOUNT, readOnly: true },
        { type: 'bind', source: workspace, target: '/workspace' },
      ],
    }))
    await rt.start(id)
  })

  afterAll(async () => {
    rmSync(workspace, { recursive: true, force: true })
    if (!rt) return
    const mine = await rt.list({ labels }).catch(() => [])
    await Promise.all(mine.map((c) => rt.remove(c.id)))
    await rt.close?.()
  })

  /** Run the runner in the container; `onEvent` may push control lines. */
  async function steer(input: unknown, onEvent: (e: RunnerEvent, stdin: ReturnType<typeof openStdin>) => void) {
    const stdin = openStdin(JSON.stringify(input))
    const events: RunnerEvent[] = []
    let buf = ''
    let err = ''
    const proc = await rt.exec(id, {
      cmd: runnerCommand(),
      stdin,
      onStdout: (c) => {
        buf += Buffer.from(c).toString('utf8')
        for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
          const e = JSON.parse(buf.slice(0, nl)) as RunnerEvent
          buf = buf.slice(nl + 1)
          events.push(e)
          if (e.type === 'result') stdin.end()
          else onEvent(e, stdin)
        }
      },
      onStderr: (c) => (err += Buffer.from(c).toString('utf8')),
    })
    const { exitCode } = await proc.exit
    stdin.end()
    const result = events.find((e): e is Result => e.type === 'result')
    return { exitCode, events, result, stderr: err }
  }

  async function psInContainer(): Promise<string> {
    let out = ''
    const proc = await rt.exec(id, { cmd: ['ps', '-ef'], onStdout: (c) => (out += Buffer.from(c).toString('utf8')) })
    await proc.exit
    return out
  }

  it('asks, and runs the tool only once it is allowed', async () => {
    const touch = 'touch /workspace/marker'
    const input = makeInput(
      `Mark [[berth:tool Bash {"command":"${touch}"}]] [[berth:tool Bash {"command":"${touch}"}]] [[berth:text Marked.]]`,
      { cwd: '/workspace', events_file: '/workspace/.berth/events/s1.jsonl', require_approval: ['Bash'] },
    )
    let asked = 0
    let markedBeforeAllowed: boolean | null = null
    const run = await steer(input, (e, stdin) => {
      if (e.type !== 'permission_request') return
      const first = asked++ === 0
      if (!first) markedBeforeAllowed = existsSync(join(workspace, 'marker'))
      stdin.push({ type: 'decision', request_id: e.request_id, decision: first ? 'deny' : 'allow', message: 'wait' })
    })
    expect(run.exitCode, run.stderr).toBe(0)
    expect(
      run.events.filter((e) => e.type === 'permission_decision').map((e) => (e as { decision: string }).decision),
    ).toEqual(['deny', 'allow'])
    expect(markedBeforeAllowed).toBe(false)
    expect(existsSync(join(workspace, 'marker'))).toBe(true)
    expect(run.result).toMatchObject({ outcome: 'success', text: 'Marked.' })
  })

  it('interrupts mid-tool: the tool process in the container is gone', async () => {
    const command = 'echo start; sleep 29.873; echo slept'
    const input = makeInput(`Wait [[berth:tool Bash {"command":"${command}"}]] [[berth:text Never.]]`, {
      cwd: '/workspace',
      events_file: '/workspace/.berth/events/s2.jsonl',
    })
    let sawRunning = false
    const run = await steer(input, (e, stdin) => {
      if (e.type !== 'tool_call') return
      // Interrupt once the tool's process runs in the container.
      const poll = async () => {
        if ((await psInContainer()).includes('sleep 29.873')) {
          sawRunning = true
          stdin.push({ type: 'interrupt' })
        } else setTimeout(poll, 100)
      }
      void poll()
    })
    expect(run.exitCode, run.stderr).toBe(0)
    expect(sawRunning).toBe(true)
    expect(run.result).toMatchObject({ outcome: 'interrupted', turns: 1 })
    expect(await psInContainer()).not.toContain('sleep 29.873')
  })
})
