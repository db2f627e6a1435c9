import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

// The library entry in both formats (Node 20.19+ requires the ESM-only citty from CJS);
// the bin's entry (top-level await) as an ES module only. The CJS build keeps what the
// first one cleaned and wrote.
export default defineConfig([
  packageBuild({ entry: ['src/index.ts', 'src/main.ts'], format: ['esm'] }),
  packageBuild({ entry: ['src/index.ts'], format: ['cjs'], clean: false }),
])
