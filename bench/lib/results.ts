import { mkdirSync, writeFileSync } from 'node:fs'
import { pathToFileURL } from 'node:url'

const RESULTS_DIR = new URL('../results/', import.meta.url)

/**
 * Write `bench/results/<name>.json` (stamped with the time and Node version) and say so.
 *
 * @example
 * ```ts
 * writeResults('runtime', { iterations: 20, results })
 * ```
 */
export function writeResults(name: string, data: Record<string, unknown>): void {
  mkdirSync(RESULTS_DIR, { recursive: true })
  const file = new URL(`${name}.json`, RESULTS_DIR)
  writeFileSync(file, `${JSON.stringify({ at: new Date().toISOString(), node: process.version, ...data }, null, 2)}\n`)
  console.log(`\nWritten to bench/results/${name}.json`)
}

/**
 * Run `main` when the module is the script node was started with (not when `bench/run.ts`
 * imports it); exit 0 when it resolves, 1 with the error when it throws.
 *
 * @example
 * ```ts
 * runAsScript(import.meta.url, main)
 * ```
 */
export function runAsScript(moduleUrl: string, main: () => Promise<unknown>): void {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err)
      process.exit(1)
    },
  )
}
