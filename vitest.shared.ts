import { fileURLToPath } from 'node:url'

const src = (pkg: string) => fileURLToPath(new URL(`./packages/${pkg}/src/index.ts`, import.meta.url))

/**
 * Shared by every package's vitest.config.ts: tests import the workspace packages from
 * their sources (`pnpm test` builds first, so the published output is checked too).
 */
export const alias = {
  '@berth/core': src('core'),
  '@berth/server': src('server'),
  '@berth/client': src('client'),
}
