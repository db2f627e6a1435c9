import { basename } from 'node:path'
import { configFromEnv, type BerthConfig } from '../config.js'

/** The configuration and where it came from, for the start-up log. */
export interface LoadedSettings {
  config: BerthConfig
  /** e.g. `environment, .env, berth.config.json`. */
  sources: string[]
}

/**
 * The server's settings, read from `dir` (where `pnpm start` was typed): the process
 * environment first, then `.env`, then `berth.config.{ts,mts,js,mjs,json,…}` (loaded with
 * c12), then the embedded defaults. One parser (`configFromEnv`) checks them all and
 * throws a message naming the variable or file key of a value that cannot be right.
 *
 * @example
 * ```ts
 * const { config } = await loadSettings(process.env.INIT_CWD ?? process.cwd())
 * ```
 */
export async function loadSettings(dir: string, env: NodeJS.ProcessEnv = process.env): Promise<LoadedSettings> {
  // .env's values taken literally (no `${VAR}` expansion, which would also rewrite any `$`
  // in the environment's own values), for the variables the environment leaves unset.
  // c12 loaded on first use: an embedder that passes its own options never needs it.
  const { loadConfig, loadDotenv } = await import('c12')
  const dotenv = await loadDotenv({ cwd: dir, fileName: '.env', env: {}, interpolate: false })
  const merged: Record<string, string | undefined> = { ...env }
  for (const [name, value] of Object.entries(dotenv))
    if (env[name] === undefined || env[name] === '') merged[name] = value
  const { config: values, _configFile: configFile } = await loadConfig<Record<string, unknown>>({
    name: 'berth',
    cwd: dir,
    configFile: 'berth.config',
    // Only the one file beside .env: no rc files, no package.json key, no layers.
    rcFile: false,
    globalRc: false,
    packageJson: false,
    dotenv: false,
    envName: false,
    giget: false,
    extend: false,
  }).catch((err: Error) => {
    throw new Error(`the config file in ${dir} could not be loaded: ${err.message}`)
  })
  const found = configFile ? basename(configFile) : undefined
  const config = configFromEnv(merged, found ? { values, path: found } : undefined)
  return {
    config,
    sources: ['environment', ...(Object.keys(dotenv).length > 0 ? ['.env'] : []), ...(found ? [found] : [])],
  }
}
