import { existsSync, readdirSync, readFileSync, renameSync } from 'node:fs'
import { join, relative, sep } from 'node:path'
import { indexEntryFor, type Logger } from '@berth/core'
import type { SqliteStore } from './sqlite.js'

/** Every file under `dir`, as unstorage's fs driver keys them (`a/b/c` → `a:b:c`). */
function* walk(dir: string, base = dir): Generator<[key: string, file: string]> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name)
    if (e.isDirectory()) {
      if (e.name !== 'node_modules' && e.name !== '.git') yield* walk(path, base)
    } else if (e.isFile()) yield [relative(base, path).split(sep).join(':'), path]
  }
}

/** A value as unstorage's fs driver returned it: JSON where it parses, the text otherwise. */
function parse(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

/**
 * Move a data dir written by the fs layout (`<dataDir>/store`, one file per key, what Berth
 * used before the SQLite store) into `store`, in batches of one transaction each, logging
 * progress. Listed records get their index entries (the same `indexEntryFor` the services
 * use). Only when every key is in is the old directory renamed to `store.migrated-<time>`
 * (kept, not deleted): a crash midway simply migrates again on the next start.
 *
 * @example
 * ```ts
 * migrateFsLayout(join(dataDir, 'store'), sqliteStore(join(dataDir, 'berth.db')), logger)
 * ```
 */
export function migrateFsLayout(
  dir: string,
  store: SqliteStore,
  logger: Logger,
): { keys: number; movedTo: string } | null {
  if (!existsSync(dir)) return null
  const files = [...walk(dir)]
  logger.info(`storage: migrating ${files.length} keys from the fs layout at ${dir} into ${store.path}`)
  const started = Date.now()
  const BATCH = 2_000
  for (let i = 0; i < files.length; i += BATCH) {
    store.importSync(
      files.slice(i, i + BATCH).map(([key, file]) => {
        const value = parse(readFileSync(file, 'utf8'))
        return { key, value, entry: indexEntryFor(key, value) }
      }),
    )
    const done = Math.min(i + BATCH, files.length)
    logger.info(`storage: migrated ${done}/${files.length} keys (${Math.round((done / files.length) * 100)}%)`)
  }
  const movedTo = `${dir}.migrated-${new Date().toISOString().replace(/[:.]/g, '-')}`
  renameSync(dir, movedTo)
  logger.info(`storage: migration done in ${Date.now() - started} ms; the old files are kept in ${movedTo}`)
  return { keys: files.length, movedTo }
}
