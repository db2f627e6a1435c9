import { spawn } from 'node:child_process'
import { request } from 'node:http'
import { createServer } from 'node:net'
import { mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { RunnerEvent, RunnerInput } from '@berth/contract'
import { inject } from 'vitest'

/**
 * Where the tests' runner bundle lives (built by global-setup), under the repository root
 * (three levels up; not testkit's `findRepoRoot`, which would load all of core here).
 */
export const BUNDLE_DIR = join(fileURLToPath(new URL('../../..', import.meta.url)), '.tmp', 'runner-bundle')

export type Result = Extract<RunnerEvent, { type: 'result' }>

declare module 'vitest' {
  interface ProvidedContext {
    /** The parent of every workspace the runner tests make (global-setup removes it at the end). */
    runnerWorkspaces: string
  }
}

/** A stub-provider input for `prompt` in a fresh workspace, with overrides. */
export function makeInput(prompt: string, overrides: Partial<RunnerInput> = {}): RunnerInput {
  const cwd = overrides.cwd ?? mkdtempSync(join(inject('runnerWorkspaces'), 'ws-'))
  return {
    protocol: 1,
    task_id: 'task_test',
    prompt,
    model: { provider: 'stub', model: null, base_url: null, api_key: null },
    allowed_tools: ['Bash', 'Read', 'Write'],
    mcp_servers: {},
    claude_md: '',
    memory: [],
    skills: [],
    agents: [],
    max_turns: 10,
    max_budget_usd: null,
    resume: null,
    env: {},
    redact: [],
    cwd,
    events_file: join(cwd, '.berth', 'events', `${overrides.task_id ?? 'task_test'}.jsonl`),
    ...overrides,
  }
}

/** What one runner process did. */
export interface RunOutcome {
  exitCode: number | null
  /** Raw stdout lines. */
  lines: string[]
  events: RunnerEvent[]
  result: Result | undefined
  stderr: string
  /** Milliseconds from spawn to the first `token` line (null: none). */
  firstTokenMs: number | null
  totalMs: number
}

/**
 * Run the bundled runner (or `main`) on the host with `input` on stdin. `onEvent` sees each
 * event as it arrives and gets the child process (to signal it).
 */
export function runRunner(
  input: unknown,
  opts: {
    onEvent?: (e: RunnerEvent, child: ReturnType<typeof spawn>) => void
    env?: NodeJS.ProcessEnv
    main?: string
    /** Keep stdin open after the input line, for control lines (`control`); closed at exit. */
    keepOpen?: boolean
  } = {},
): Promise<RunOutcome> {
  const started = Date.now()
  const child = spawn(process.execPath, [opts.main ?? join(BUNDLE_DIR, 'main.js')], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...opts.env },
  })
  const lines: string[] = []
  const events: RunnerEvent[] = []
  let firstTokenMs: number | null = null
  let buf = ''
  let stderr = ''
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (chunk: string) => {
    buf += chunk
    for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      lines.push(line)
      const event = JSON.parse(line) as RunnerEvent
      events.push(event)
      if (event.type === 'token' && firstTokenMs === null) firstTokenMs = Date.now() - started
      opts.onEvent?.(event, child)
    }
  })
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (c: string) => (stderr += c))
  child.stdin.on('error', () => {})
  const text = typeof input === 'string' ? input : JSON.stringify(input)
  if (opts.keepOpen) child.stdin.write(`${text}\n`)
  else child.stdin.end(text)
  return new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => {
      const result = events.find((e): e is Result => e.type === 'result')
      resolve({ exitCode: code, lines, events, result, stderr, firstTokenMs, totalMs: Date.now() - started })
    })
  })
}

/** Write one control line on a runner's stdin (a RunnerControl, or raw text). */
export function control(child: ReturnType<typeof spawn>, line: unknown): void {
  child.stdin!.write(`${typeof line === 'string' ? line : JSON.stringify(line)}\n`)
}

/** Parse JSON lines. */
export function parseLines(text: string): RunnerEvent[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as RunnerEvent)
}

/** A port free on this machine now (the agent's server listens on the host here). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
    s.on('error', reject)
  })
}

/** What a GET of the port gives: the body, or the connection error's code. */
export function probe(port: number): Promise<string> {
  return new Promise((resolve) => {
    request({ host: '127.0.0.1', port }, (res) => {
      let body = ''
      res.on('data', (c) => (body += c))
      res.on('end', () => resolve(body))
    })
      .on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message))
      .end()
  })
}

/** The bundled runner in warm mode: stdin stays open; stderr and stdout collected. */
export function warmRunner(env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [join(BUNDLE_DIR, 'main.js'), '--warm'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c))
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c))
  const closed = new Promise<number | null>((resolve) => child.on('close', resolve))
  return {
    child,
    closed,
    stdout: () => stdout,
    events: () => parseLines(stdout),
    stderr: () => stderr,
    send: (line: unknown) => child.stdin.write(`${JSON.stringify(line)}\n`),
  }
}
