import { readFileSync, writeFileSync } from 'node:fs'
import Module from 'node:module'
import { dirname, join } from 'node:path'
import { Script, constants } from 'node:vm'

/** The runner program's file, next to its loader (`main.js`): CommonJS, the SDK inlined. */
export const PROGRAM_FILE = 'runner.cjs'

/** The V8 code cache of {@link PROGRAM_FILE}, written beside it when the bundle is built. */
export const CODE_CACHE_FILE = `${PROGRAM_FILE}.cache`

/**
 * Compile the runner program in `dir` as Node would compile a CommonJS module, with V8's
 * code cache when `cachedData` is given. The loader and the bundler both compile through
 * here, so the cache is made for exactly the source the loader runs. A cache from another
 * Node or V8 build is rejected by V8 (`script.cachedDataRejected`) and the program is
 * compiled as usual.
 *
 * @example
 * ```ts
 * const script = compileProgram('/opt/berth-runner', readFileSync('/opt/berth-runner/runner.cjs.cache'))
 * ```
 */
export function compileProgram(dir: string, cachedData?: Buffer): Script {
  const file = join(dir, PROGRAM_FILE)
  const source = readFileSync(file, 'utf8').replace(/^#!.*/, '')
  return new Script(Module.wrap(source), {
    filename: file,
    cachedData,
    // The program has no dynamic import; if one came, it resolves as in any module.
    importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  })
}

/**
 * Write the code cache of the program in `dir` for the Node running this (what
 * `bundleRunner` does, and `node main.js --code-cache` in an image whose Node differs).
 *
 * @example
 * ```ts
 * writeCodeCache('/opt/berth-runner') // writes /opt/berth-runner/runner.cjs.cache
 * ```
 */
export function writeCodeCache(dir: string): void {
  writeFileSync(join(dir, CODE_CACHE_FILE), compileProgram(dir).createCachedData())
}

/**
 * Run the runner program in `dir` in this process (what `main.js` does), using the code
 * cache beside it when there is one. Node 20 has no compile cache of its own (Node 22's
 * `module.enableCompileCache`); compiling the SDK's 1.4 MB of JavaScript is about a tenth
 * of the runner's CPU per task, and the cache removes most of it.
 *
 * @example
 * ```ts
 * runProgram(dirname(fileURLToPath(import.meta.url)))
 * ```
 */
export function runProgram(dir: string): void {
  let cachedData: Buffer | undefined
  try {
    cachedData = readFileSync(join(dir, CODE_CACHE_FILE))
  } catch {
    // No cache (a dist/ build, not a bundle): compile as usual.
  }
  const script = compileProgram(dir, cachedData)
  // Seen with BERTH_RUNNER_PROBE=1 (probe.ts is part of the program, so not imported here).
  if (process.env.BERTH_RUNNER_PROBE === '1') {
    process.stderr.write(
      `${JSON.stringify({ probe: 'code-cache', t: Date.now(), state: !cachedData ? 'none' : script.cachedDataRejected ? 'rejected' : 'used' })}\n`,
    )
  }
  const file = join(dir, PROGRAM_FILE)
  const module = { exports: {} }
  const wrapper = script.runInThisContext() as (
    exports: object,
    require: NodeJS.Require,
    module: object,
    filename: string,
    dirname: string,
  ) => void
  wrapper(module.exports, Module.createRequire(file), module, file, dirname(file))
}
