#!/usr/bin/env node
/**
 * Build the workspace packages the current package depends on, but only when a `dist`
 * is missing or older than its sources, so `pnpm start` works on a fresh clone and costs
 * nothing once built. Run from a package directory (its package.json is read):
 *
 *   node ../standalone-server/scripts/ensure-built.mjs && tsx src/main.ts
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'

const cwd = process.cwd()
const own = JSON.parse(readFileSync(join(cwd, 'package.json'), 'utf8'))

/** The workspace root: the nearest directory above with pnpm-workspace.yaml. */
function workspaceRoot(dir) {
  for (let d = dir; d !== dirname(d); d = dirname(d)) if (existsSync(join(d, 'pnpm-workspace.yaml'))) return d
  throw new Error('ensure-built: no pnpm-workspace.yaml above ' + dir)
}

/** Workspace dependencies, transitively: directory of every `workspace:` dependency. */
function workspaceDeps(pkgDir, seen = new Map()) {
  const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'))
  for (const [name, range] of Object.entries({ ...pkg.dependencies })) {
    if (!String(range).startsWith('workspace:') || seen.has(name)) continue
    // pnpm links workspace dependencies into node_modules; follow the link to the package.
    const dir = resolve(pkgDir, 'node_modules', name)
    if (!existsSync(join(dir, 'package.json'))) continue
    seen.set(name, dir)
    workspaceDeps(dir, seen)
  }
  return seen
}

function newestMtime(dir) {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs)
  }
  return newest
}

function isStale(dir) {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  if (!pkg.scripts?.build) return false
  const out = join(dir, 'dist', 'index.js')
  if (!existsSync(out) || !existsSync(join(dir, 'dist', 'index.d.ts'))) return true
  return existsSync(join(dir, 'src')) && newestMtime(join(dir, 'src')) > statSync(out).mtimeMs
}

const stale = [...workspaceDeps(cwd)].filter(([, dir]) => isStale(dir)).map(([name]) => name)
if (stale.length > 0) {
  console.log(`Building ${stale.join(', ')} (dist missing or older than src)…`)
  // `<pkg>^...`: every workspace dependency of this package, in dependency order.
  execFileSync('pnpm', ['--filter', `${own.name}^...`, 'run', 'build'], {
    cwd: workspaceRoot(cwd),
    stdio: 'inherit',
  })
}
