import { readdirSync, readFileSync, readlinkSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { freePort, makeInput, probe, runRunner } from './helpers.js'

/** The pids of processes whose working directory is `dir` (or below it). */
function processesIn(dir: string): number[] {
  const pids: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (readlinkSync(`/proc/${name}/cwd`).startsWith(dir)) pids.push(Number(name))
    } catch {
      // Gone, or not ours to read.
    }
  }
  return pids
}

// Issue 42: a task is one user message and the agent's turns until it ends its turn. A
// server the agent starts with Claude Code's own `run_in_background` Bash must not hold the
// run open (Claude Code would keep running, and the result never come, until it ends).
describe('berth-runner: background work ends no task', () => {
  it('a turn that starts a run_in_background server completes with its final text; the server and Claude Code are gone after', async () => {
    const port = await freePort()
    const server = `node -e "require('http').createServer((q,r)=>r.end('bg-'+'served')).listen(${port})"`
    const check =
      `node -e "const go=n=>require('http').get('http://127.0.0.1:${port}',r=>r.pipe(process.stdout))` +
      `.on('error',e=>n?setTimeout(go,200,n-1):(console.error(e.message),process.exit(1)));go(150)"`
    const input = makeInput(
      `Serve it. [[berth:tool Bash ${JSON.stringify({ command: server, run_in_background: true })}]] ` +
        `[[berth:tool Bash ${JSON.stringify({ command: check })}]] [[berth:text The server runs in the background.]]`,
      { allowed_tools: ['Bash'] },
    )
    // Stdin stays open, as the server keeps it for control lines.
    const run = await runRunner(input, { keepOpen: true })
    expect(run.exitCode, run.stderr).toBe(0)
    expect(run.result).toMatchObject({
      outcome: 'success',
      text: 'The server runs in the background.',
      turns: 3,
      error: null,
      tool_calls: [
        { name: 'Bash', input: { command: server, run_in_background: true } },
        { name: 'Bash', input: { command: check } },
      ],
    })
    // The task's own calls: its three turns, priced.
    expect((run.result!.model_usage ?? []).reduce((n, m) => n + m.calls, 0)).toBeGreaterThanOrEqual(3)
    expect(run.result!.cost_usd).toBeGreaterThan(0)
    // The foreground probe of the same turn reached the server.
    const outputs = run.events.flatMap((e) => (e.type === 'tool_result' ? [e.output] : []))
    expect(outputs[1]).toBe('bg-served')
    // The result is the last line, and nothing of the turn follows it.
    expect(run.events.at(-1)?.type).toBe('result')
    expect(run.events.filter((e) => e.type === 'turn_start')).toHaveLength(3)
    // The server went with the run, and so did Claude Code: nothing runs in the workspace.
    expect(await probe(port)).toBe('ECONNREFUSED')
    expect(processesIn(input.cwd)).toEqual([])
    expect(readFileSync(input.events_file, 'utf8').trim().split('\n').at(-1)).toContain('"type":"result"')

    // The next prompt of the conversation (a session's follow-up) is a turn of its own: Claude
    // Code's notice that the server was stopped, and its result, are not it.
    const gone = `node -e "require('http').get('http://127.0.0.1:${port}').on('error',e=>console.log('stopped:'+e.code))"`
    const next = await runRunner(
      makeInput(`Still up? [[berth:tool Bash ${JSON.stringify({ command: gone })}]] [[berth:text Checked.]]`, {
        allowed_tools: ['Bash'],
        cwd: input.cwd,
        task_id: 'task_next',
        resume: run.result!.session_id,
      }),
      { keepOpen: true },
    )
    expect(next.result).toMatchObject({ outcome: 'success', text: 'Checked.', turns: 2, error: null })
    expect(next.events.find((e) => e.type === 'tool_result')).toMatchObject({ output: 'stopped:ECONNREFUSED' })
  }, 240_000)
})
