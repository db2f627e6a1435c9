import { fileURLToPath } from 'node:url'

const src = (file: string) => fileURLToPath(new URL(`./packages/${file}`, import.meta.url))

/**
 * Shared by every package's vitest.config.ts: tests import the workspace packages from
 * their sources (`pnpm test` builds first, so the published output is checked too).
 * Exact matches, so `@berth/core/contract` is not taken for `@berth/core` + a path.
 */
export const alias = [
  { find: /^@berth\/core$/, replacement: src('core/src/index.ts') },
  { find: /^@berth\/core\/contract$/, replacement: src('core/src/contract.ts') },
  { find: /^@berth\/server$/, replacement: src('server/src/index.ts') },
  { find: /^@berth\/client$/, replacement: src('client/src/index.ts') },
]
