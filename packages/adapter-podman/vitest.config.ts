import { defineProject } from 'vitest/config'
import { alias } from '../../vitest.shared.js'

export default defineProject({
  resolve: { alias },
  test: {
    name: 'adapter-podman',
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
})
