#!/usr/bin/env node
// Build the self-contained runner directory a container mounts read-only:
//   node packages/runner/scripts/bundle.mjs <outDir>
// then, in a container with <outDir> mounted at /opt/berth-runner:
//   node /opt/berth-runner/main.js   (RunnerInput JSON on stdin)
// Needs the package built first (pnpm --filter @berth/runner build).
import { bundleRunner } from '../dist/index.js'

const out = process.argv[2]
if (!out) {
  console.error('usage: node scripts/bundle.mjs <outDir>')
  process.exit(2)
}
const started = Date.now()
const { dir, sdkVersion } = bundleRunner(out)
console.log(`runner bundle in ${dir} (claude-agent-sdk ${sdkVersion}, ${Date.now() - started} ms)`)
