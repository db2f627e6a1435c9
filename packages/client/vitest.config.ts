import { fileURLToPath } from 'node:url'
import { defineProject } from 'vitest/config'
import { alias } from '../../vitest.shared.js'

export default defineProject({
  resolve: { alias },
  test: {
    name: 'client',
    include: ['test/**/*.test.ts'],
    // The engine suites run real tasks in containers (tasks-engine.test.ts).
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // The type-level assertions (test/*.test-d.ts) fail this project like any other test.
    typecheck: {
      enabled: true,
      include: ['test/**/*.test-d.ts'],
      // Source errors are the repository tsc's job; here only the assertions count.
      ignoreSourceErrors: true,
      tsconfig: fileURLToPath(new URL('./test/tsconfig.json', import.meta.url)),
    },
  },
})
