import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

// `index` is browser-safe; `node/index` adds the Node-only parts (ws, fs, tar).
export default defineConfig(packageBuild({ entry: { index: 'src/index.ts', node: 'src/node/index.ts' } }))
