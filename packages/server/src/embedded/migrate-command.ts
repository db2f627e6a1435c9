/**
 * `migrate`: copy every record from one store into another, e.g. from the embedded SQLite
 * file into Postgres before moving to several instances (stop the servers first: writes
 * made during the copy may be missed). The standalone server's `pnpm migrate` runs it:
 *
 *   pnpm --filter @berth/standalone-server migrate --from sqlite:.data/berth.db \
 *     --to 'postgres://berth:secret@db.internal:5432/berth?sslmode=verify-full'
 *   pnpm --filter @berth/standalone-server migrate --from redis://127.0.0.1:6379/0 --to postgres://… --dry-run
 *
 * Store URLs: `sqlite:<path>`, `redis://…` (`?prefix=`), `postgres://…` (`?schema=`;
 * BERTH_DATABASE_CA_FILE for a private CA). Prints progress, then keys per kind on both
 * sides; fails when the target disagrees with the source. `--dry-run` counts only;
 * `--force` copies into a target that already holds keys.
 */
import { parseArgs } from 'node:util'
import { copyStore, type KindCounts } from '../storage/copy.js'
import { openStoreUrl, type OpenedStore } from './store-url.js'

const USAGE = 'usage: migrate --from <store-url> --to <store-url> [--dry-run] [--force]'

function table(source: KindCounts, target: KindCounts): string {
  const kinds = [...new Set([...Object.keys(source), ...Object.keys(target)])].sort()
  const rows = [['kind', 'source', 'target'], ...kinds.map((k) => [k, String(source[k] ?? 0), String(target[k] ?? 0)])]
  const width = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(width[i]!) : c.padStart(width[i]!))).join('  ')).join('\n')
}

/**
 * Run `migrate` with command-line `args`; relative paths are read from `cwd`. Logs to
 * `log` and `error` (default the console) and resolves with the exit code (0, else 1).
 *
 * @example
 * ```ts
 * process.exitCode = await migrateCommand(['--from', 'sqlite:.data/berth.db', '--to', 'postgres://…'], process.cwd())
 * ```
 */
export async function migrateCommand(
  args: string[],
  cwd: string,
  io: { log?: (line: string) => void; error?: (line: string) => void; env?: NodeJS.ProcessEnv } = {},
): Promise<number> {
  const { log = console.log, error = console.error, env = process.env } = io
  const fail = (message: string) => {
    error(`migrate: ${message}`)
    return 1
  }
  let values: { from?: string; to?: string; 'dry-run': boolean; force: boolean }
  try {
    values = parseArgs({
      args,
      options: {
        from: { type: 'string' },
        to: { type: 'string' },
        'dry-run': { type: 'boolean', default: false },
        force: { type: 'boolean', default: false },
      },
      strict: true,
    }).values
  } catch (err) {
    return fail(`${(err as Error).message}\n${USAGE}`)
  }
  if (!values.from || !values.to) return fail(USAGE)
  if (values.from === values.to) return fail('--from and --to name the same store')
  const caFile = env.BERTH_DATABASE_CA_FILE || undefined
  const opened: OpenedStore[] = []
  try {
    const from = await openStoreUrl(values.from, cwd, { mustExist: true, caFile })
    opened.push(from)
    const to = await openStoreUrl(values.to, cwd, { caFile })
    opened.push(to)
    const dryRun = values['dry-run']
    log(`migrate: ${dryRun ? 'counting' : 'copying'} ${from.description} → ${to.description}`)
    const started = Date.now()
    const report = await copyStore(from.store, to.store, {
      dryRun,
      force: values.force,
      onProgress: (done, total) =>
        log(`migrate: ${done}/${total} keys (${total ? Math.round((done / total) * 100) : 100}%)`),
    })
    log(table(report.source, report.target))
    if (dryRun) {
      log('migrate: dry run, nothing written')
      return 0
    }
    log(
      `migrate: copied ${report.copied} keys in ${Date.now() - started} ms; ${report.indexesChecked} list indexes compared`,
    )
    for (const m of report.mismatches) error(`migrate: MISMATCH ${m}`)
    if (report.mismatches.length > 0) return 1
    log('migrate: verified: every kind and list total agrees')
    return 0
  } catch (err) {
    return fail((err as Error).message)
  } finally {
    for (const s of opened) await s.store.close().catch(() => {})
  }
}
