import { isAbsolute, join, resolve } from 'node:path'
import { RunnerInput } from '@berth/contract'
import * as v from 'valibot'

/** Why stdin did not hold a usable {@link RunnerInput}. */
export class InputError extends Error {}

/**
 * Parse and validate one RunnerInput (JSON). `events_file` is resolved against `cwd`.
 * Throws {@link InputError} with every issue's path and message.
 *
 * @example
 * ```ts
 * const input = parseInput(await readAll(process.stdin))
 * ```
 */
export function parseInput(text: string): RunnerInput {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (err) {
    throw new InputError(`stdin is not JSON: ${(err as Error).message}`)
  }
  const parsed = v.safeParse(RunnerInput, json)
  if (!parsed.success) {
    const issues = parsed.issues.map((i) => `${v.getDotPath(i) ?? '(root)'}: ${i.message}`)
    throw new InputError(`invalid RunnerInput: ${issues.join('; ')}`)
  }
  const input = parsed.output
  if (!isAbsolute(input.cwd)) throw new InputError(`invalid RunnerInput: cwd must be absolute, got "${input.cwd}"`)
  return { ...input, events_file: resolve(input.cwd, input.events_file) }
}

/**
 * Read a stream to its end as UTF-8.
 *
 * @example
 * ```ts
 * const text = await readAll(process.stdin)
 * ```
 */
export async function readAll(stream: AsyncIterable<Buffer | string>): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of stream) chunks.push(typeof c === 'string' ? Buffer.from(c) : c)
  return Buffer.concat(chunks).toString('utf8')
}

/**
 * The input with its container paths (`cwd`, `events_file`) under `root`, for a runner
 * that runs as a plain host process whose container `/` is a host directory (the `local`
 * runtime without a sandbox sets `BERTH_CONTAINER_ROOT`). Unchanged without a root.
 *
 * @example
 * ```ts
 * underRoot(input, '/srv/berth/containers/ab12/root').cwd // '/srv/berth/containers/ab12/root/workspace'
 * ```
 */
export function underRoot(input: RunnerInput, root: string | undefined): RunnerInput {
  if (!root) return input
  return { ...input, cwd: join(root, input.cwd), events_file: join(root, input.events_file) }
}
