import { createBerthClient, isBerthError, type NodeBerthClient } from '@berth/client/node'
import { createConsola } from 'consola'
import type { ArgsDef } from 'citty'

/** Messages go to stderr, so stdout carries only the agent's text (or `--json`). */
// An explicit level: consola would go quiet when it guesses a test or CI environment.
export const log = createConsola({ level: 3, stdout: process.stderr, stderr: process.stderr })

/** Flags every command takes. */
export const commonArgs = {
  url: { type: 'string', description: 'Berth URL (default: $BERTH_URL, else http://127.0.0.1:3000)', valueHint: 'url' },
  token: { type: 'string', description: 'Caller key (default: $BERTH_TOKEN)', valueHint: 'key' },
  json: { type: 'boolean', description: 'Print JSON for scripts instead of text' },
} satisfies ArgsDef

/** Exit codes: a finished task that did not complete, and a failed request or bad usage. */
export const EXIT = { ok: 0, taskFailed: 1, error: 2, interrupted: 130 } as const

/**
 * The client for the `--url`/`--token` flags, falling back to `BERTH_URL`/`BERTH_TOKEN`.
 *
 * @example
 * ```ts
 * const berth = clientFor(args)
 * ```
 */
export function clientFor(args: { url?: string | undefined; token?: string | undefined }): NodeBerthClient {
  const baseURL = args.url || process.env.BERTH_URL || 'http://127.0.0.1:3000'
  const token = args.token || process.env.BERTH_TOKEN || undefined
  return createBerthClient({ baseURL, token })
}

/**
 * Run a command body: a Berth error is printed as `CODE: message` (with the issues of a
 * 400) and exits 2; the body's number is the exit code.
 *
 * @example
 * ```ts
 * run: ({ args }) => action(async () => { ...; return EXIT.ok })
 * ```
 */
export async function action(body: () => Promise<number> | Promise<void>): Promise<void> {
  try {
    process.exitCode = (await body()) ?? EXIT.ok
  } catch (err) {
    if (isBerthError(err)) {
      log.error(`${err.code}: ${err.message}`)
      const issues = (err.details as { issues?: { path?: string; message: string }[] } | undefined)?.issues
      for (const issue of issues ?? []) log.error(`  ${issue.path ?? ''}: ${issue.message}`)
      if (err.code === 'UNAUTHORIZED') log.info('Set BERTH_TOKEN (or --token) to a caller key.')
    } else log.error(err instanceof Error ? err.message : String(err))
    process.exitCode = EXIT.error
  }
}

/**
 * Print `value` as JSON on stdout.
 *
 * @example
 * ```ts
 * printJson(task)
 * ```
 */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`)
}

/**
 * Columns padded to their widest cell, on stdout.
 *
 * @example
 * ```ts
 * printTable([['ID', 'STATUS'], [task.task_id, task.status]])
 * ```
 */
export function printTable(rows: string[][]): void {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)))
  for (const row of rows)
    process.stdout.write(
      `${row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')}\n`,
    )
}

/**
 * A string cut to `max` characters on one line.
 *
 * @example
 * ```ts
 * oneLine('a\nlong prompt', 20)
 * ```
 */
export function oneLine(text: string, max = 60): string {
  const flat = text.replace(/\s+/g, ' ').trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}
