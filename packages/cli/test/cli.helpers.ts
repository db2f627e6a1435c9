/** Running the package's bin (built output, a real process) to its end, for the CLI tests. */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const BIN = fileURLToPath(new URL('../bin/berth.mjs', import.meta.url))

export interface BerthRun {
  code: number | null
  stdout: string
  stderr: string
}

/** The bin's path, for tests that run it their own way (on a terminal). */
export { BIN }

/** Run `berth …` to its end with `env` added and stdin a pipe holding `stdin` (not a terminal). */
export function runBin(args: string[], env: Record<string, string>, stdin = ''): Promise<BerthRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env, NO_COLOR: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
    child.stdin.end(stdin)
  })
}

/** Run `berth …` against the server at `url` as the caller with `token`. */
export function runBerth(url: string, token: string, args: string[]): Promise<BerthRun> {
  return runBin(args, { BERTH_URL: url, BERTH_TOKEN: token })
}
