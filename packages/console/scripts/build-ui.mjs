// Builds the browser UI into dist/ui: one bundled script, one stylesheet, the page, and a
// manifest (name → content type, ETag) the server serves them from. No CDN, no framework.
import { build } from 'esbuild'
import { createHash } from 'node:crypto'
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const out = join(root, 'dist', 'ui')
rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })

await build({
  entryPoints: [join(root, 'src/ui/main.ts')],
  bundle: true,
  minify: true,
  sourcemap: false,
  format: 'iife',
  target: ['chrome110', 'firefox110', 'safari16'],
  outfile: join(out, 'console.js'),
  logLevel: 'warning',
})
copyFileSync(join(root, 'src/ui/console.css'), join(out, 'console.css'))
copyFileSync(join(root, 'src/ui/index.html'), join(out, 'index.html'))
copyFileSync(join(root, 'src/ui/favicon.svg'), join(out, 'favicon.svg'))

const TYPES = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.svg': 'image/svg+xml',
}
const files = {}
for (const name of readdirSync(out).sort()) {
  const body = readFileSync(join(out, name))
  files[name] = {
    type: TYPES[name.slice(name.lastIndexOf('.'))],
    etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
  }
}
writeFileSync(join(out, 'manifest.json'), JSON.stringify({ files }, null, 2))
console.log(`console UI: ${Object.keys(files).join(', ')} → dist/ui`)
