import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    // Every package with a vitest.config.ts is a project.
    projects: ['packages/*/vitest.config.ts'],
  },
})
