import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { podmanRuntime } from '@berth/adapter-podman'
import { IDLE_COMMAND, type ContainerRuntime } from '@berth/core'
import { ensureEngines } from '@berth/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RUNNER_MOUNT, runnerCommand } from '../src/bundle.js'
import { BUNDLE_DIR, makeInput, parseLines, type Result } from './helpers.js'

// The runner where it really runs: in a Podman container from the test image (node +
// bash + busybox, no network), the bundle mounted read-only, the workspace bind-mounted.
describe('berth-runner inside a Podman container (stub provider, network none)', () => {
  const labels = { 'berth.test.run': `runner-${process.pid}` }
  let rt: ContainerRuntime
  let image: string
  const workspace = mkdtempSync(join(tmpdir(), 'berth-runner-ctr-ws-'))

  beforeAll(async () => {
    const [podman] = ensureEngines(['podman'])
    image = podman!.image
    rt = podmanRuntime({ socketPath: podman!.socketPath })
    await rt.ping()
  })

  afterAll(async () => {
    rmSync(workspace, { recursive: true, force: true })
    if (!rt) return
    const mine = await rt.list({ labels }).catch(() => [])
    await Promise.all(mine.map((c) => rt.remove(c.id)))
    await rt.close?.()
  })

  async function container(): Promise<string> {
    const { id } = await rt.create({
      image,
      cmd: [...IDLE_COMMAND],
      workingDir: '/workspace',
      network: 'none',
      labels,
      mounts: [
        { type: 'bind', source: BUNDLE_DIR, target: RUNNER_MOUNT, readOnly: true },
        { type: 'bind', source: workspace, target: '/workspace' },
      ],
    })
    await rt.start(id)
    return id
  }

  async function exec(id: string, input: unknown) {
    const started = Date.now()
    let firstTokenMs: number | null = null
    let out = ''
    let err = ''
    const proc = await rt.exec(id, {
      cmd: runnerCommand(),
      stdin: JSON.stringify(input),
      onStdout: (c) => {
        out += Buffer.from(c).toString('utf8')
        if (firstTokenMs === null && out.includes('"type":"token"')) firstTokenMs = Date.now() - started
      },
      onStderr: (c) => (err += Buffer.from(c).toString('utf8')),
    })
    const { exitCode } = await proc.exit
    const events = parseLines(out)
    const result = events.find((e): e is Result => e.type === 'result')
    return { exitCode, events, result, stderr: err, out, firstTokenMs, totalMs: Date.now() - started }
  }

  it('runs a stub task with a Bash tool call to completion', async () => {
    const id = await container()
    const input = makeInput(
      'Where am I? [[berth:tool Bash {"command":"pwd; echo $BERTH_NOTE"}]] [[berth:text Found it.]]',
      {
        cwd: '/workspace',
        env: { BERTH_NOTE: 'inside' },
        events_file: '/workspace/.berth/events/c1.jsonl',
      },
    )
    const run = await exec(id, input)
    expect(run.exitCode, run.stderr).toBe(0)
    expect(run.events.find((e) => e.type === 'tool_result')).toMatchObject({
      output: '/workspace\ninside',
      is_error: false,
    })
    expect(run.result).toMatchObject({ outcome: 'success', text: 'Found it.', turns: 2 })
    expect(run.result!.cost_usd).toBeGreaterThan(0)
    // The events file landed in the bind-mounted workspace, identical to stdout.
    expect(readFileSync(join(workspace, '.berth/events/c1.jsonl'), 'utf8')).toBe(run.out)
  })

  it('resumes the session in a second, new container on the same workspace', async () => {
    const first = await exec(
      await container(),
      makeInput('Remember: the tide turns at 14:05', { cwd: '/workspace', events_file: '.berth/events/r1.jsonl' }),
    )
    expect(first.result?.outcome, first.stderr).toBe('success')
    const session = first.result!.session_id!
    const second = await exec(
      await container(),
      makeInput('And when does the tide turn? [[berth:recall]]', {
        cwd: '/workspace',
        resume: session,
        events_file: '.berth/events/r2.jsonl',
      }),
    )
    expect(second.result).toMatchObject({
      outcome: 'success',
      session_id: session,
      text: 'The first prompt was: Remember: the tide turns at 14:05',
    })
  })

  // How fast is `pnpm bench` (bench/tasks.ts: exec to first token and result); here, what streams.
  it('streams an answer token by token before its result, three tasks in a row in one running container', async () => {
    const id = await container()
    for (let i = 0; i < 3; i++) {
      const run = await exec(
        id,
        makeInput(`Hello ${i} [[berth:text Hi there, task ${i}]]`, {
          cwd: '/workspace',
          events_file: `.berth/events/stream-${i}.jsonl`,
        }),
      )
      expect(run.result?.outcome, run.stderr).toBe('success')
      const types = run.events.map((e: { type: string }) => e.type)
      expect(types.indexOf('token')).toBeGreaterThanOrEqual(0)
      expect(types.lastIndexOf('token')).toBeLessThan(types.indexOf('result'))
      const streamed = run.events
        .flatMap((e: { type: string; text?: string }) => (e.type === 'token' ? [e.text] : []))
        .join('')
      expect(streamed).toBe(`Hi there, task ${i}`)
    }
  })
})
