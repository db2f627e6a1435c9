/**
 * The README's ten-line embed, run as written: its `js` block saved as a module inside this
 * package (so `@berth/server` resolves to the built package, as it would from npm), started
 * with node in a fresh directory, then the README's first-task block against it. On this
 * machine `createBerth`'s default runtime is the engine that answers (Docker here); the
 * packed-package test runs the same block from npm tarballs on `local`.
 */
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { defaultPoolName } from '@berth/core'
import { afterAll, expect, it } from 'vitest'
import { engineRuntime, sweep } from './pool.helpers.js'
import { REPO_ROOT, bareEnv, freePort, startStandalone } from './standalone.helpers.js'

/**
 * The code block right after `<!-- doc-test: <name> -->` in the README.
 *
 * @example
 * ```ts
 * readmeBlock('embed', 'js') // "import { createServer } from 'node:http'\n…"
 * ```
 */
export function readmeBlock(name: string, lang: string): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')
  const match = new RegExp(`<!-- doc-test: ${name} -->\\n\`\`\`${lang}\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(readme)
  if (!match) throw new Error(`README.md has no \`${lang}\` block after <!-- doc-test: ${name} -->`)
  return match[1]!
}

/** Run `script` with bash (`-e -o pipefail`); resolves with its exit code and output. */
export function bash(script: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', script], { env, stdio: ['ignore', 'pipe', 'inherit'] })
    let stdout = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.on('close', (code) => resolve({ code, stdout }))
  })
}

const work = mkdtempSync(join(tmpdir(), 'berth-readme-embed-'))
const scriptDir = join(REPO_ROOT, 'packages/server/.tmp', `readme-embed-${process.pid}`)
afterAll(async () => {
  // The pool is named for the data dir; whatever the run left under that name goes.
  await sweep(engineRuntime('docker').runtime, defaultPoolName(join(work, '.data')))
  rmSync(work, { recursive: true, force: true })
  rmSync(scriptDir, { recursive: true, force: true })
})

it("the README's embed runs the README's first task", async () => {
  mkdirSync(scriptDir, { recursive: true })
  writeFileSync(join(scriptDir, 'embed.mjs'), readmeBlock('embed', 'js'))
  const port = await freePort()
  const server = await startStandalone({
    command: [process.execPath, join(scriptDir, 'embed.mjs')],
    cwd: work,
    port,
    env: bareEnv({ PORT: String(port), BERTH_ADMIN_TOKEN: 'embed-admin-token' }),
    timeoutMs: 120_000,
  })
  try {
    expect(server.output()).toContain(`Berth on http://127.0.0.1:${port}`)
    const run = await bash(readmeBlock('first-task', 'sh'), {
      PATH: process.env.PATH!,
      HOME: work,
      BERTH: server.url,
      BERTH_ADMIN_TOKEN: 'embed-admin-token',
    })
    expect(run.code, server.output()).toBe(0)
    const task = JSON.parse(run.stdout) as { status: string; result: { tool_calls: { name: string }[] } | null }
    expect(task.status, `${run.stdout}\n--- server ---\n${server.output()}`).toBe('completed')
    expect(task.result?.tool_calls).toContainEqual(expect.objectContaining({ name: 'Bash' }))
    expect(server.output()).toMatch(/container runtime chosen.*docker/)
  } finally {
    // SIGTERM: the embed's own handler closes the server and Berth, and the process ends.
    expect(await server.stop()).toBe(0)
  }
}, 600_000)
