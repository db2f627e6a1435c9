import { readdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const packages = fileURLToPath(new URL('./packages/', import.meta.url))

/**
 * Shared by every package's vitest.config.ts: tests import the workspace packages from
 * their sources (`pnpm test` builds first, so the published output is checked too).
 * Exact matches, so `@berth/core/contract` is not taken for `@berth/core` + a path.
 */
export const alias = [
  { find: /^@berth\/core\/contract$/, replacement: `${packages}core/src/contract.ts` },
  ...readdirSync(packages).map((dir) => ({ find: new RegExp(`^@berth/${dir}$`), replacement: `${packages}${dir}/src/index.ts` })),
]
