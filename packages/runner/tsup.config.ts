import { fileURLToPath } from 'node:url'
import { defineConfig } from 'tsup'
import { packageBuild } from '../../tsup.shared.js'

const source = (path: string) => fileURLToPath(new URL(path, import.meta.url))

export default defineConfig([
  // The library: bundleRunner & co. for the server.
  packageBuild({ entry: ['src/index.ts'], clean: false }),
  // The program: one ESM file with everything but the Claude Agent SDK (which finds its
  // native binary through node_modules) inlined, workspace packages from their sources.
  {
    entry: { main: 'src/main.ts' },
    format: ['esm'],
    platform: 'node',
    target: 'node20',
    clean: false,
    dts: false,
    sourcemap: false,
    splitting: false,
    external: ['@anthropic-ai/claude-agent-sdk'],
    noExternal: [/^(?!@anthropic-ai\/claude-agent-sdk$).*/],
    esbuildOptions(options) {
      options.alias = {
        '@berth/core/contract': source('../core/src/contract.ts'),
        '@berth/stub-model': source('../stub-model/src/index.ts'),
      }
    },
  },
])
