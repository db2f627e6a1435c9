import { defineProject } from 'vitest/config'
import { alias } from '../../vitest.shared.js'

export default defineProject({
  resolve: { alias },
  test: {
    name: 'server',
    include: ['test/**/*.test.ts'],
    // The pool suites need Podman and Docker (provisioned here, never skipped).
    globalSetup: ['test/pool.global-setup.ts', 'test/runner.global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
})
