import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

// Both formats (Node 20.19+ requires the ESM-only citty from CJS); the bin runs dist/main.js.
export default defineConfig(packageBuild({ entry: ['src/index.ts', 'src/main.ts'] }))
