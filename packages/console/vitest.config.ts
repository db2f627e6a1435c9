import { defineProject } from 'vitest/config'
import { alias } from '../../vitest.shared.js'

export default defineProject({
  resolve: { alias },
  test: {
    name: 'console',
    include: ['test/**/*.test.ts'],
    // A real browser (Debian's chromium, installed when missing) against a real server on
    // Podman: provisioned here, never skipped.
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 180_000,
  },
})
