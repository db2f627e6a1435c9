#!/usr/bin/env node
// In a checkout, build first when the output is missing or older than the sources.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const newest = (dir) =>
  Math.max(
    0,
    ...readdirSync(dir, { withFileTypes: true }).map((e) =>
      e.isDirectory() ? newest(`${dir}/${e.name}`) : statSync(`${dir}/${e.name}`).mtimeMs,
    ),
  )
if (existsSync(`${root}src`)) {
  const built = existsSync(`${root}dist/main.js`) ? statSync(`${root}dist/main.js`).mtimeMs : 0
  if (built < newest(`${root}src`)) {
    process.stderr.write('berth: building the CLI (once)…\n')
    execFileSync('pnpm', ['--filter', '@berth/cli...', 'run', 'build'], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
    })
  }
}
await import('../dist/main.js')
