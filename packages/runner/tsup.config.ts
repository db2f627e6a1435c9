import { fileURLToPath } from 'node:url'
import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

const source = (path: string) => fileURLToPath(new URL(path, import.meta.url))

export default defineConfig([
  // The library: bundleRunner & co. for the server.
  packageBuild({ entry: ['src/index.ts'], clean: false }),
  // The loader (`dist/main.js`, the `berth-runner` command): runs the program below with
  // V8's code cache when the bundle has one (program.ts).
  {
    entry: { main: 'src/load.ts' },
    format: ['esm'],
    platform: 'node',
    target: 'node20',
    clean: false,
    dts: false,
    sourcemap: false,
    splitting: false,
  },
  // The program (`dist/runner.cjs`): one CommonJS file with everything inlined, the Claude
  // Agent SDK included (only CommonJS can use a code cache on Node 20), workspace packages
  // from their sources. `shims` gives the SDK an `import.meta.url` (it finds its native
  // binary from there).
  {
    entry: { runner: 'src/main.ts' },
    format: ['cjs'],
    platform: 'node',
    target: 'node20',
    clean: false,
    dts: false,
    sourcemap: false,
    splitting: false,
    shims: true,
    noExternal: [/.*/],
    outExtension: () => ({ js: '.cjs' }),
    esbuildOptions(options) {
      options.alias = {
        '@berth/contract': source('../contract/src/index.ts'),
        '@berth/stub-model': source('../stub-model/src/index.ts'),
      }
    },
  },
])
