import { defineProject } from 'vitest/config'
import { alias } from '../../vitest.shared.js'

export default defineProject({
  resolve: { alias },
  test: {
    name: 'runner',
    include: ['test/**/*.test.ts'],
    globalSetup: ['../../vitest.leftovers.ts', 'test/global-setup.ts'],
    // Every container and volume carries this run's label; the run fails if any outlives it.
    setupFiles: ['../../vitest.leftovers.setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
})
