import type { Options } from 'tsup'

/**
 * The build every published package shares: ESM + CJS + d.ts for Node 20, with
 * `import.meta.url` shimmed in the CJS output (used to find package files and assets).
 *
 * @example
 * ```ts
 * export default defineConfig(packageBuild({ entry: { index: 'src/index.ts', node: 'src/node/index.ts' } }))
 * ```
 */
export function packageBuild(overrides: Options = {}): Options {
  return {
    entry: ['src/index.ts'],
    format: ['esm', 'cjs'],
    dts: true,
    clean: true,
    sourcemap: true,
    target: 'node20',
    shims: true,
    ...overrides,
  }
}
