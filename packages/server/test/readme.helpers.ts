/** The README's code blocks, found by their `<!-- doc-test: … -->` markers, and a bash to run them. */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { REPO_ROOT } from './standalone.helpers.js'

/**
 * The code block right after `<!-- doc-test: <name> -->` in the README.
 *
 * @example
 * ```ts
 * readmeBlock('embed', 'js') // "import { createServer } from 'node:http'\n…"
 * ```
 */
export function readmeBlock(name: string, lang: string): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')
  const match = new RegExp(`<!-- doc-test: ${name} -->\\n\`\`\`${lang}\\n([\\s\\S]*?)\\n\`\`\`\\n`).exec(readme)
  if (!match) throw new Error(`README.md has no \`${lang}\` block after <!-- doc-test: ${name} -->`)
  return match[1]!
}

/** Run `script` with bash (`-e -o pipefail`); resolves with its exit code and output. */
export function bash(script: string, env: Record<string, string>): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', script], { env, stdio: ['ignore', 'pipe', 'inherit'] })
    let stdout = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.on('close', (code) => resolve({ code, stdout }))
  })
}
