import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

// `model` and `providers` are their own entries: they must load without vitest.
export default defineConfig(packageBuild({ entry: { index: 'src/index.ts', model: 'src/model/index.ts', providers: 'src/providers/index.ts' } }))
