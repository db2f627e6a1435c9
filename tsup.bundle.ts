import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve, sep } from 'node:path'
import type { Options } from 'tsup'

type Plugin = NonNullable<Options['esbuildPlugins']>[number]

/** What {@link bundleDependencies} takes: the packages to bundle and the modules to replace. */
export interface BundleOptions {
  /** Packages bundled into dist with their whole dependency tree (tsup's `noExternal`). */
  bundle: (string | RegExp)[]
  /**
   * Modules replaced by a stub that loads but throws `message` when used: packages whose
   * install scripts npm would run and which the bundled code reaches only on paths Berth never
   * takes. A module required inside `try` (an optional native add-on) then takes its fallback.
   */
  stubs: { modules: RegExp; message: string }[]
}

/**
 * Bundle dependencies into a package's dist, so that `npm install` of the package never
 * installs them (nor runs their install scripts): stubs for the modules it must not reach,
 * a `require` for the ESM build (the bundled code is CommonJS), and `dist/THIRD_PARTY_NOTICES.md`
 * with the name, version, licence and licence text of every bundled package.
 *
 * @example
 * ```ts
 * export default defineConfig(
 *   packageBuild(bundleDependencies({ bundle: ['bullmq'], stubs: [{ modules: /^msgpackr-extract$/, message: 'no native add-on' }] })),
 * )
 * ```
 */
export function bundleDependencies({ bundle, stubs }: BundleOptions): Options {
  return {
    noExternal: bundle,
    esbuildPlugins: [stubPlugin(stubs), noticesPlugin()],
    // esbuild's `require` shim in ESM output calls the real `require` when there is one.
    banner: ({ format }) =>
      format === 'esm'
        ? {
            js: "import { createRequire as __bundleRequire } from 'node:module'\nconst require = __bundleRequire(import.meta.url)",
          }
        : {},
  }
}

const NATIVE = /require\((['"])([^'"]+\.node)\1\)/
const ADDON = 'berth-native-addon:'

/**
 * Stub modules: a Proxy that answers the interop checks of the bundler and throws the
 * stub's message on any other use, so a top-level `require` (dockerode loads its BuildKit
 * session code at start) still loads.
 */
function stubPlugin(stubs: BundleOptions['stubs']): Plugin {
  return {
    name: 'berth-stubs',
    setup(build) {
      // A native add-on (`require('./build/Release/x.node')`, always inside `try`) is never
      // bundled: the require is renamed before tsup's own resolver, which fails on a missing file.
      build.onLoad({ filter: /[\\/]node_modules[\\/].*\.c?js$/ }, (args) => {
        const source = readFileSync(args.path, 'utf8')
        if (!NATIVE.test(source)) return undefined
        const contents = source.replace(
          new RegExp(NATIVE, 'g'),
          (_, _quote, path: string) => `require(${JSON.stringify(`${ADDON}${path.slice(0, -'.node'.length)}`)})`,
        )
        return { contents, loader: 'js', resolveDir: dirname(args.path) }
      })
      build.onResolve({ filter: new RegExp(`^${ADDON}`) }, (args) => ({
        path: `-1:${args.path.slice(ADDON.length)}`,
        namespace: 'berth-stub',
      }))
      stubs.forEach((stub, index) => {
        build.onResolve({ filter: stub.modules }, (args) => ({
          path: `${index}:${args.path}`,
          namespace: 'berth-stub',
        }))
      })
      build.onLoad({ filter: /.*/, namespace: 'berth-stub' }, (args) => {
        const [index, name] = [Number(args.path.split(':')[0]), args.path.slice(args.path.indexOf(':') + 1)]
        const message = `${name}: ${stubs[index]?.message ?? 'native add-on not bundled; the JavaScript fallback runs'}`
        return {
          loader: 'js',
          contents: `const message = ${JSON.stringify(message)}
module.exports = new Proxy(function unavailable() { throw new Error(message) }, {
  get(target, key) {
    if (key === '__esModule' || key === 'then' || typeof key === 'symbol') return undefined
    throw new Error(message)
  },
  construct() { throw new Error(message) },
})`,
        }
      })
    },
  }
}

/** The bundled packages' licences, written next to the build that bundled them. */
function noticesPlugin(): Plugin {
  return {
    name: 'berth-notices',
    setup(build) {
      build.onEnd((result) => {
        if (!result.metafile || result.errors.length > 0) return
        const packages = new Map<string, string>()
        for (const input of Object.keys(result.metafile.inputs)) {
          const dir = packageDir(input)
          if (dir) packages.set(dir, notice(dir))
        }
        const outDir = build.initialOptions.outdir ?? 'dist'
        mkdirSync(outDir, { recursive: true })
        const header =
          '# Third-party notices\n\nThis package bundles the following packages in its `dist`; their licences follow.\n'
        writeFileSync(join(outDir, 'THIRD_PARTY_NOTICES.md'), [header, ...[...packages.values()].sort()].join('\n'))
      })
    },
  }
}

/** The directory of the package inside `node_modules` that holds `input`, if any. */
function packageDir(input: string): string | undefined {
  const parts = resolve(input).split(sep)
  const at = parts.lastIndexOf('node_modules')
  if (at < 0 || !parts[at + 1]) return undefined
  const length = parts[at + 1]!.startsWith('@') ? 3 : 2
  return parts.slice(0, at + length).join(sep)
}

function notice(dir: string): string {
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    name: string
    version: string
    license?: string
    licenses?: { type: string }[]
  }
  const license = manifest.license ?? manifest.licenses?.map((l) => l.type).join(' OR ') ?? 'see below'
  const file = readdirSync(dir).find((name) => /^(licen[cs]e|copying)(\.|$)/i.test(name))
  const text = file ? readFileSync(join(dir, file), 'utf8').trim() : `(no licence file; package.json says ${license})`
  return `## ${manifest.name}@${manifest.version} (${license})\n\n\`\`\`\n${text}\n\`\`\`\n`
}
