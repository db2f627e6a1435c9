import { defineProject } from 'vitest/config'
import { alias } from '../../vitest.shared.js'

export default defineProject({
  resolve: { alias },
  test: {
    name: 'adapter-local',
    include: ['test/**/*.test.ts'],
    // bubblewrap for the sandboxed suites (installed when root and missing, never skipped).
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
  },
})
