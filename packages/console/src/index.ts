/**
 * `@berth/console`: the browser console's static assets, built at package build time.
 * `@berth/server` serves them at `/console` (the `console` option of `createBerth`).
 */
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** One file of the console: its bytes, content type and ETag. */
export interface ConsoleAsset {
  body: Uint8Array<ArrayBuffer>
  type: string
  etag: string
}

/**
 * The directory holding the built console (`index.html`, `console.js`, `console.css`, …).
 *
 * @example
 * ```ts
 * consoleDir() // '/…/node_modules/@berth/console/dist/ui'
 * ```
 */
export function consoleDir(): string {
  // dist/index.js → dist/ui; src/index.ts (tests run from sources) → dist/ui as well.
  const here = dirname(fileURLToPath(import.meta.url))
  return join(here, '..', 'dist', 'ui')
}

/**
 * Every file of the built console by name, read once. Throws when the console was not built
 * (`pnpm --filter @berth/console build`).
 *
 * @example
 * ```ts
 * const assets = loadConsoleAssets()
 * assets.get('index.html')?.type // 'text/html; charset=utf-8'
 * ```
 */
export function loadConsoleAssets(dir: string = consoleDir()): Map<string, ConsoleAsset> {
  const manifestPath = join(dir, 'manifest.json')
  if (!existsSync(manifestPath))
    throw new Error(`@berth/console is not built: ${manifestPath} is missing (run pnpm build)`)
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as {
    files: Record<string, { type: string; etag: string }>
  }
  const assets = new Map<string, ConsoleAsset>()
  for (const [name, meta] of Object.entries(manifest.files)) {
    assets.set(name, { body: new Uint8Array(readFileSync(join(dir, name))), type: meta.type, etag: meta.etag })
  }
  return assets
}
