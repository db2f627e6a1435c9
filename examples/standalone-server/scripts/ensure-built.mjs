#!/usr/bin/env node
/**
 * Build the workspace packages the current package depends on, but only when a `dist`
 * is missing or older than its sources, so `pnpm start` works on a fresh clone and costs
 * nothing once built. Run from a package directory (its package.json is read):
 *
 *   node ../standalone-server/scripts/ensure-built.mjs && tsx src/main.ts
 *
 * One line per package built (`built @berth/core (4.2 s)`); a build's own output is shown
 * only when it fails.
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'

const cwd = process.cwd()

function readPackage(dir) {
  return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
}

/** Direct `workspace:` dependencies of the package in `pkgDir`: name → directory. */
function directWorkspaceDeps(pkgDir) {
  const deps = new Map()
  for (const [name, range] of Object.entries({ ...readPackage(pkgDir).dependencies })) {
    if (!String(range).startsWith('workspace:')) continue
    // pnpm links workspace dependencies into node_modules; follow the link to the package.
    const dir = resolve(pkgDir, 'node_modules', name)
    if (existsSync(join(dir, 'package.json'))) deps.set(name, dir)
  }
  return deps
}

/** Every workspace dependency, transitively, dependencies before their dependents. */
function workspaceDepsInOrder(pkgDir, order = new Map(), visiting = new Set()) {
  for (const [name, dir] of directWorkspaceDeps(pkgDir)) {
    if (order.has(name) || visiting.has(name)) continue
    visiting.add(name)
    workspaceDepsInOrder(dir, order, visiting)
    order.set(name, dir)
  }
  return order
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
  const out = join(dir, 'dist', 'index.js')
  if (!existsSync(out) || !existsSync(join(dir, 'dist', 'index.d.ts'))) return true
  return existsSync(join(dir, 'src')) && newestMtime(join(dir, 'src')) > statSync(out).mtimeMs
}

/** Run `pnpm run build` in `dir` with its output captured; resolves with the exit code and output. */
function build(dir) {
  return new Promise((done) => {
    const child = spawn('pnpm', ['run', 'build'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
    const chunks = []
    child.stdout.on('data', (chunk) => chunks.push(chunk))
    child.stderr.on('data', (chunk) => chunks.push(chunk))
    child.on('error', (err) => done({ code: 1, output: String(err.message) }))
    child.on('close', (code) => done({ code: code ?? 1, output: Buffer.concat(chunks).toString() }))
  })
}

const packages = [...workspaceDepsInOrder(cwd)].filter(([, dir]) => readPackage(dir).scripts?.build)
// A package is rebuilt when its own dist is stale or when one of its dependencies is rebuilt
// (its types and bundles are made from theirs).
const rebuilt = new Set()
for (const [name, dir] of packages) {
  const depRebuilt = [...directWorkspaceDeps(dir).keys()].some((dep) => rebuilt.has(dep))
  if (!depRebuilt && !isStale(dir)) continue
  rebuilt.add(name)
  const started = performance.now()
  const { code, output } = await build(dir)
  const seconds = ((performance.now() - started) / 1000).toFixed(1)
  if (code !== 0) {
    process.stderr.write(output)
    console.error(`build of ${name} failed (exit code ${code}, ${seconds} s); its output is above`)
    process.exit(1)
  }
  console.log(`built ${name} (${seconds} s)`)
}
