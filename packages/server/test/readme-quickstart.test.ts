/**
 * The README's quick start, run as written: its `pnpm start` block in the repository root
 * (a fresh data dir, a free port), then its first-task block with bash, with only the
 * tools a fresh Debian with Node has. The task must end `completed` with its Bash call in
 * `result.tool_calls`, on every runtime: `local`, Docker with the default image (made on
 * first use when missing) and Podman. The blocks are found by their `<!-- doc-test: … -->`
 * markers, so the README and the behaviour cannot drift apart.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { engineRuntime, sweep, uniquePoolName } from './pool.helpers.js'
import { REPO_ROOT, freePort, startStandalone } from './standalone.helpers.js'

/** The shell block right after `<!-- doc-test: <name> -->` in the README. */
function readmeBlock(name: string): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')
  const match = new RegExp(`<!-- doc-test: ${name} -->\\n\`\`\`sh\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(readme)
  if (!match) throw new Error(`README.md has no \`sh\` block after <!-- doc-test: ${name} -->`)
  return match[1]!
}

/** What a fresh Debian with Node 20 has: bash, coreutils, curl, node (and pnpm, installed by the README). */
const FRESH_DEBIAN_TOOLS = ['bash', 'sh', 'cat', 'env', 'seq', 'sleep', 'curl', 'node']

/** A PATH holding only those tools (links to this machine's), so a block needing e.g. `jq` fails here. */
function freshDebianPath(dir: string): string {
  mkdirSync(dir)
  for (const tool of FRESH_DEBIAN_TOOLS) {
    const found = (process.env.PATH ?? '')
      .split(':')
      .map((d) => join(d, tool))
      .find((p) => existsSync(p) && statSync(p).isFile())
    if (!found) throw new Error(`${tool} is not on this machine's PATH`)
    symlinkSync(found, join(dir, tool))
  }
  return dir
}

/** Run `script` with bash (`-e -o pipefail`: a failing step fails the run); resolves with its exit code and output. */
function bash(
  script: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', script], { env, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** This environment without Berth's settings (the README's defaults must do) and without pnpm's INIT_CWD. */
function cleanEnv(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([k, v]) => v !== undefined && !k.startsWith('BERTH_') && k !== 'INIT_CWD' && k !== 'PORT',
    ),
  ) as Record<string, string>
}

const RUNTIMES = ['local', 'docker', 'podman'] as const

describe.each(RUNTIMES)('README quick start on %s', (runtime) => {
  const dir = mkdtempSync(join(tmpdir(), `berth-readme-${runtime}-`))
  const pool = uniquePoolName(`readme-${runtime}`)
  afterAll(async () => {
    // Whatever the run left on the engine under its own pool name, and nothing else.
    if (runtime !== 'local') await sweep(engineRuntime(runtime).runtime, pool)
    rmSync(dir, { recursive: true, force: true })
  })

  it('the first task completes with its Bash call', async () => {
    const port = await freePort()
    const start = readmeBlock('start')
    expect(start).toContain('pnpm start')
    const server = await startStandalone({
      command: ['bash', '-c', start],
      cwd: REPO_ROOT,
      port,
      // The README's defaults, on a fresh data dir and a free port, on this runtime. No
      // BERTH_IMAGE: Docker and Podman use the default image, made when missing.
      env: {
        ...cleanEnv(),
        PORT: String(port),
        BERTH_DATA_DIR: join(dir, 'data'),
        BERTH_RUNTIME: runtime,
        BERTH_POOL_NAME: pool,
      },
      timeoutMs: 600_000,
    })
    try {
      const run = await bash(readmeBlock('first-task'), {
        PATH: freshDebianPath(join(dir, 'bin')),
        HOME: dir,
        BERTH: server.url,
      })
      expect(run.code, `${run.stderr}\n--- server ---\n${server.output()}`).toBe(0)
      const task = JSON.parse(run.stdout) as {
        status: string
        result: { tool_calls: { name: string; input: unknown }[] } | null
      }
      expect(task.status, `${run.stdout}\n--- server ---\n${server.output()}`).toBe('completed')
      expect(task.result?.tool_calls).toContainEqual(
        expect.objectContaining({ name: 'Bash', input: { command: 'uname -a' } }),
      )
    } finally {
      await server.stop()
    }
    expect(server.output()).toContain('stopped')
  }, 900_000)
})
