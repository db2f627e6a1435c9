import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

// ESM only: citty is ESM only, and the bin is an ES module.
export default defineConfig(packageBuild({ entry: ['src/index.ts', 'src/main.ts'], format: ['esm'] }))
