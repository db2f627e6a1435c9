/**
 * What a browser downloads: `@berth/client` (its published `dist/index.js`) bundled by
 * esbuild for the browser, minified, and the size of that bundle plain and gzipped. Sizes
 * are deterministic for a given tree, so one run is the figure. `pnpm bench` runs it after
 * the build; alone: `pnpm build && node --import tsx bench/bundle.ts`.
 */
import { gzipSync } from 'node:zlib'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'

const ENTRIES = { '@berth/client': '../packages/client/dist/index.js' }

export async function main(): Promise<void> {
  console.log('\nBrowser bundles (esbuild, platform browser, ESM, minified)')
  console.log('| package | bytes | gzip | modules |\n|---|---|---|---|')
  for (const [name, path] of Object.entries(ENTRIES)) {
    const entry = fileURLToPath(new URL(path, import.meta.url))
    const out = await build({
      entryPoints: [entry],
      bundle: true,
      minify: true,
      platform: 'browser',
      format: 'esm',
      write: false,
      metafile: true,
      logLevel: 'silent',
    })
    const code = out.outputFiles[0]!.contents
    console.log(`| ${name} | ${code.length} | ${gzipSync(code).length} | ${Object.keys(out.metafile.inputs).length} |`)
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main()
