import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

export default defineConfig([
  // ESM one file per module, so a bundler keeps only the modules a caller uses
  // (`sideEffects: false`): the console's status list does not pull in every schema.
  packageBuild({
    entry: ['src/**/*.ts'],
    format: ['esm'],
    bundle: false,
    dts: { entry: 'src/index.ts' },
    clean: false,
  }),
  // CommonJS as one file (its imports would need `.cjs` names).
  packageBuild({ entry: ['src/index.ts'], format: ['cjs'], clean: false }),
])
