import { existsSync, readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const packages = fileURLToPath(new URL('./packages/', import.meta.url))

/** `@berth/testkit/model` → `packages/testkit/src/model/index.ts` (or `src/model.ts`). */
function subpath(pkg: string, sub: string): string {
  const dir = `${packages}${pkg}/src/${sub}/index.ts`
  return existsSync(dir) ? dir : `${packages}${pkg}/src/${sub}.ts`
}

/**
 * Shared by every package's vitest.config.ts: tests import the workspace packages, and
 * their subpath exports, from their sources (`pnpm test` builds first, so the published
 * output is checked too).
 */
export const alias = [
  ...readdirSync(packages).map((dir) => ({
    find: new RegExp(`^@berth/${dir}/([a-z-]+)$`),
    replacement: '$1',
    customResolver: (source: string) => subpath(dir, source),
  })),
  ...readdirSync(packages).map((dir) => ({
    find: new RegExp(`^@berth/${dir}$`),
    replacement: `${packages}${dir}/src/index.ts`,
  })),
]
