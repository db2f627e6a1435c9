import { defineProject } from 'vitest/config'
import { alias } from '../../vitest.shared.js'

export default defineProject({
  resolve: { alias },
  test: {
    name: 'cli',
    include: ['test/**/*.test.ts'],
    // `berth` runs real tasks in containers on Docker and Podman.
    testTimeout: 90_000,
    hookTimeout: 120_000,
  },
})
