import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

// `model` is its own entry: `@berth/testkit/model` must load without vitest.
export default defineConfig(packageBuild({ entry: { index: 'src/index.ts', model: 'src/model/index.ts' } }))
