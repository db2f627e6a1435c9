import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

/** The Claude Agent SDK's package name. */
export const SDK = '@anthropic-ai/claude-agent-sdk'

/**
 * The SDK's native-binary package for a platform (default: this machine).
 *
 * @example
 * ```ts
 * platformPackage('linux', 'arm64', true) // '@anthropic-ai/claude-agent-sdk-linux-arm64-musl'
 * ```
 */
export function platformPackage(
  platform: string = process.platform,
  arch: string = process.arch,
  musl: boolean = isMusl(),
): string {
  return `${SDK}-${platform}-${arch}${platform === 'linux' && musl ? '-musl' : ''}`
}

function isMusl(): boolean {
  if (process.platform !== 'linux') return false
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header
  return !header?.glibcVersionRuntime
}

/**
 * Where Claude Code's native binary is, seen from `from` (a file of the runner): in a
 * bundle, under `node_modules/` beside it; in an install (the `berth-runner` command), next
 * to the SDK package, where a package manager puts the SDK's optional dependencies.
 * Undefined when neither has it (the SDK then says what is missing).
 *
 * @example
 * ```ts
 * claudeExecutable(__filename) // '/opt/berth-runner/node_modules/@anthropic-ai/claude-agent-sdk-linux-x64/claude'
 * ```
 */
export function claudeExecutable(from: string): string | undefined {
  const pkg = platformPackage()
  const binary = process.platform === 'win32' ? 'claude.exe' : 'claude'
  const own = createRequire(from)
  const bases = [() => own, () => createRequire(join(dirname(own.resolve(SDK)), 'package.json'))]
  for (const base of bases) {
    try {
      const path = join(dirname(base().resolve(`${pkg}/package.json`)), binary)
      if (existsSync(path)) return path
    } catch {
      // Not from here: try the next place.
    }
  }
  return undefined
}
