/**
 * The runner's V8 code cache: the bundle carries one for its program, the loader uses it,
 * and a cache that does not fit (another build of the program) or no cache at all only
 * costs the compile, never the run. Also: the program run from the package's `dist/` (the
 * `berth-runner` command, no bundle) finds Claude Code's binary through the SDK.
 */
import { execFileSync } from 'node:child_process'
import { appendFileSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { findRepoRoot } from '@berth/testkit'
import { afterAll, describe, expect, it } from 'vitest'
import { BUNDLE_DIR, makeInput, runRunner } from './helpers.js'

const scratch = mkdtempSync(join(findRepoRoot(), '.tmp', 'code-cache-test-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** A copy of the bundle's code (its node_modules linked, not copied) to tamper with. */
function bundleCopy(name: string): string {
  const dir = join(scratch, name)
  mkdirSync(dir)
  for (const f of ['main.js', 'runner.cjs', 'runner.cjs.cache', 'package.json'])
    copyFileSync(join(BUNDLE_DIR, f), join(dir, f))
  symlinkSync(join(BUNDLE_DIR, 'node_modules'), join(dir, 'node_modules'))
  return dir
}

/** Run `main` on a one-line task; the code-cache state the loader reported and the outcome. */
async function run(main: string): Promise<{ cache: string | undefined; outcome: string | undefined; stderr: string }> {
  const r = await runRunner(makeInput('[[berth:text cached]]'), { main, env: { BERTH_RUNNER_PROBE: '1' } })
  const line = r.stderr.split('\n').find((l) => l.startsWith('{"probe":"code-cache"'))
  return {
    cache: line ? (JSON.parse(line) as { state: string }).state : undefined,
    outcome: r.result?.outcome,
    stderr: r.stderr,
  }
}

describe('the runner program and its code cache', () => {
  it('the bundle holds the program, its cache, and no separate SDK (it is inlined)', () => {
    expect(existsSync(join(BUNDLE_DIR, 'runner.cjs'))).toBe(true)
    expect(existsSync(join(BUNDLE_DIR, 'runner.cjs.cache'))).toBe(true)
    expect(existsSync(join(BUNDLE_DIR, 'node_modules', '@anthropic-ai', 'claude-agent-sdk'))).toBe(false)
  })

  it('the loader runs the program from the cache the bundle was built with', async () => {
    const r = await run(join(BUNDLE_DIR, 'main.js'))
    expect(r.cache, r.stderr).toBe('used')
    expect(r.outcome).toBe('success')
  })

  it('a cache made for another build of the program is rejected and the run goes on', async () => {
    const dir = bundleCopy('stale')
    appendFileSync(join(dir, 'runner.cjs'), '\n// another build\n')
    const r = await run(join(dir, 'main.js'))
    expect(r.cache, r.stderr).toBe('rejected')
    expect(r.outcome).toBe('success')
  })

  it('without a cache the program compiles as usual; `main.js --code-cache` makes one for this Node', async () => {
    const dir = bundleCopy('none')
    rmSync(join(dir, 'runner.cjs.cache'))
    const r = await run(join(dir, 'main.js'))
    expect(r.cache, r.stderr).toBe('none')
    expect(r.outcome).toBe('success')

    execFileSync(process.execPath, [join(dir, 'main.js'), '--code-cache'])
    expect(existsSync(join(dir, 'runner.cjs.cache'))).toBe(true)
    const again = await run(join(dir, 'main.js'))
    expect(again.cache, again.stderr).toBe('used')
    expect(again.outcome).toBe('success')
  })

  it("from the package's dist/ (no bundle), Claude Code's binary is found next to the SDK", async () => {
    const r = await run(fileURLToPath(new URL('../dist/main.js', import.meta.url)))
    expect(r.outcome, r.stderr).toBe('success')
  })
})
