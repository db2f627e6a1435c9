/**
 * The browser build: `@berth/client` bundles for platform=browser with no Node-only import
 * (no `node:*`, no builtin, no `ws`), while `@berth/client/node` does need them. Checks the
 * published output (`dist`).
 */
import { builtinModules } from 'node:module'
import { fileURLToPath } from 'node:url'
import { build, type Plugin } from 'esbuild'
import { expect, it } from 'vitest'

const dist = (file: string) => fileURLToPath(new URL(`../dist/${file}`, import.meta.url))
const NODE_ONLY = new Set([...builtinModules, 'ws', 'tar'])

/** Bundle `entry` for browsers; resolves the Node-only imports it reached. */
async function nodeImports(entry: string): Promise<string[]> {
  const found: string[] = []
  const spy: Plugin = {
    name: 'node-only',
    setup(b) {
      b.onResolve({ filter: /.*/ }, (args) => {
        const bare = args.path.replace(/^node:/, '').split('/')[0]!
        if (args.path.startsWith('node:') || NODE_ONLY.has(bare) || NODE_ONLY.has(args.path)) {
          found.push(args.path)
          return { path: args.path, external: true }
        }
        return undefined
      })
    },
  }
  await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    write: false,
    logLevel: 'silent',
    plugins: [spy],
  })
  return [...new Set(found)].sort()
}

it('bundles @berth/client for the browser without any Node-only import', async () => {
  expect(await nodeImports(dist('index.js'))).toEqual([])
})

it('bundles no server code: nothing of @berth/core, the route declarations from @berth/contract', async () => {
  const { metafile } = await build({
    entryPoints: [dist('index.js')],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    write: false,
    logLevel: 'silent',
    metafile: true,
  })
  const inputs = Object.keys(metafile.inputs)
  expect(inputs.filter((path) => /(^|\/)(core\/(dist|src)|@berth\/core)\//.test(path))).toEqual([])
  // The check sees the workspace packages the bundle does hold.
  expect(inputs.some((path) => /(^|\/)(contract\/(dist|src)|@berth\/contract)\//.test(path))).toBe(true)
})

it('finds the Node-only imports of @berth/client/node (the check can see them)', async () => {
  const found = await nodeImports(dist('node.js'))
  expect(found.some((p) => p.replace(/^node:/, '') === 'fs')).toBe(true)
  expect(found).toEqual(expect.arrayContaining(['tar', 'ws']))
})
