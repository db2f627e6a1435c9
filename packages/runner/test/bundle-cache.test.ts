/**
 * The shared runner bundle: content-addressed, one per install and version whatever the
 * number of data dirs and servers, created atomically when several start at once.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { findRepoRoot } from '@berth/testkit'
import { afterAll, describe, expect, it } from 'vitest'
import { platformPackage } from '../src/bundle.js'
import { sharedRunnerBundle } from '../src/bundle-cache.js'

// The cache the server's tests and the soak use too (BERTH_CACHE_DIR=.tmp/berth-cache): this
// version's bundle is built once.
const cacheDir = join(findRepoRoot(), '.tmp', 'berth-cache', 'runner')
const scratch = mkdtempSync(join(findRepoRoot(), '.tmp', 'bundle-cache-test-'))
afterAll(() => rmSync(scratch, { recursive: true, force: true }))

describe('sharedRunnerBundle', () => {
  it('resolves the same install to the same directory, every time', () => {
    const a = sharedRunnerBundle({ cacheDir })
    const b = sharedRunnerBundle({ cacheDir })
    expect(b).toEqual(a)
    expect(a.dir.startsWith(cacheDir)).toBe(true)
    expect(existsSync(a.main)).toBe(true)
    expect(readdirSync(cacheDir).filter((d) => d.includes('.tmp-'))).toEqual([])
  })

  it('a changed runner is a new bundle that hard-links the native binary of the last one instead of copying it', () => {
    const base = sharedRunnerBundle({ cacheDir })
    const entry = join(scratch, 'main.js')
    writeFileSync(entry, readFileSync(base.main))
    const program = join(scratch, 'runner.cjs')
    writeFileSync(program, `${readFileSync(join(base.dir, 'runner.cjs'), 'utf8')}\n// a changed runner ${Date.now()}\n`)
    const changed = sharedRunnerBundle({ cacheDir, entry })
    try {
      expect(changed.dir).not.toBe(base.dir)
      expect(readFileSync(join(changed.dir, 'runner.cjs'), 'utf8')).toBe(readFileSync(program, 'utf8'))
      const binary = (b: { dir: string }) => statSync(join(b.dir, 'node_modules', platformPackage(), 'claude'))
      expect(binary(changed).ino).toBe(binary(base).ino)
    } finally {
      rmSync(changed.dir, { recursive: true, force: true })
    }
  })

  it('concurrent first starts agree on one bundle and leave no partial one', async () => {
    const fresh = join(scratch, 'cache')
    const module = fileURLToPath(new URL('../src/bundle-cache.ts', import.meta.url))
    const code = `const { sharedRunnerBundle } = await import(${JSON.stringify(module)}); console.log(sharedRunnerBundle({ cacheDir: ${JSON.stringify(fresh)}, platformPackages: [] }).dir)`
    const start = () =>
      new Promise<string>((resolve, reject) => {
        const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
          cwd: findRepoRoot(),
          stdio: ['ignore', 'pipe', 'inherit'],
        })
        let out = ''
        p.stdout.on('data', (d) => (out += d))
        p.on('exit', (c) => (c === 0 ? resolve(out.trim()) : reject(new Error(`exit ${c}`))))
      })
    const dirs = await Promise.all([start(), start(), start()])
    expect(new Set(dirs).size).toBe(1)
    expect(readdirSync(fresh)).toEqual([dirs[0]!.split('/').at(-1)])
    expect(existsSync(join(dirs[0]!, 'main.js'))).toBe(true)
  })
})
