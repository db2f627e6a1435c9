import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

// `model`, `providers` and `store-writer` are their own entries: they must load without vitest.
export default defineConfig(
  packageBuild({
    entry: {
      index: 'src/index.ts',
      model: 'src/model.ts',
      providers: 'src/providers/index.ts',
      'store-writer': 'src/store-writer.ts',
    },
  }),
)
