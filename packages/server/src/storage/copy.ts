import type { IndexEntry, Store, StoredEntry } from '@berth/core'
import { derivedEntries } from './entries.js'

/** Keys per kind (the key's first `:` segment), as a copy counts them. */
export type KindCounts = Record<string, number>

/** What {@link copyStore} did, and whether the target agrees with the source. */
export interface CopyReport {
  /** Keys per kind in the source. */
  source: KindCounts
  /** Keys per kind in the target after the copy (before it, on a dry run). */
  target: KindCounts
  /** Keys written (0 on a dry run). */
  copied: number
  /** Indexes (scope and filter) whose totals were compared between source and target. */
  indexesChecked: number
  /** Every disagreement found by the verification, in plain words; empty when all agree. */
  mismatches: string[]
}

/** Options of {@link copyStore}. */
export interface CopyOptions {
  /** Count only: read the source and the target, write nothing. */
  dryRun?: boolean
  /** Copy into a target that already holds keys (they are overwritten or kept). */
  force?: boolean
  /** Called after every `progressEvery` keys (default 1000) and at the end. */
  onProgress?: (done: number, total: number) => void
  progressEvery?: number
  /** Writes in flight at once (default 32). */
  concurrency?: number
}

function kinds(keys: string[]): KindCounts {
  const out: KindCounts = {}
  for (const key of keys) {
    const cut = key.indexOf(':')
    const kind = cut < 0 ? key : key.slice(0, cut)
    out[kind] = (out[kind] ?? 0) + 1
  }
  return out
}

/**
 * Copy every key of one store into another with its index entry (the driver's own
 * `entries()`, or the entry the services would give it), several writes in flight, then
 * verify: keys per kind, and the total of every index the copied records are listed in,
 * must be the same on both sides. A target that already holds keys is refused unless
 * `force`; `dryRun` counts only. The source is only read.
 *
 * @example
 * ```ts
 * const report = await copyStore(sqliteStore('.data/berth.db'), await postgresStore(url), {
 *   onProgress: (done, total) => console.log(`${done}/${total}`),
 * })
 * if (report.mismatches.length) process.exitCode = 1
 * ```
 */
export async function copyStore(from: Store, to: Store, opts: CopyOptions = {}): Promise<CopyReport> {
  const sourceKeys = await from.keys('')
  const source = kinds(sourceKeys)
  const before = await to.keys('')
  if (opts.dryRun) return { source, target: kinds(before), copied: 0, indexesChecked: 0, mismatches: [] }
  if (before.length > 0 && !opts.force)
    throw new Error(`the target store already holds ${before.length} keys: copy into an empty store, or force it`)

  const total = sourceKeys.length
  const every = opts.progressEvery ?? 1000
  const window = opts.concurrency ?? 32
  // Every index a copied record is listed in: scope and term ('' for the whole scope).
  const indexes = new Map<string, Set<string>>()
  const note = (entry: IndexEntry) => {
    let terms = indexes.get(entry.scope)
    if (!terms) {
      terms = new Set([''])
      indexes.set(entry.scope, terms)
    }
    for (const term of entry.terms ?? []) terms.add(term)
  }
  const write = (e: StoredEntry) => (e.index ? to.put(e.key, e.value, e.index) : to.set(e.key, e.value))
  let copied = 0
  let batch: StoredEntry[] = []
  const flush = async () => {
    await Promise.all(batch.map(write))
    const was = copied
    copied += batch.length
    batch = []
    if (Math.floor(copied / every) > Math.floor(was / every)) opts.onProgress?.(copied - (copied % every), total)
  }
  for await (const e of from.entries?.() ?? derivedEntries(from)) {
    if (e.index) note(e.index)
    batch.push(e)
    if (batch.length >= window) await flush()
  }
  await flush()
  opts.onProgress?.(copied, total)

  const target = kinds(await to.keys(''))
  const mismatches: string[] = []
  for (const kind of new Set([...Object.keys(source), ...Object.keys(target)])) {
    if (source[kind] !== target[kind])
      mismatches.push(`${kind}: ${source[kind] ?? 0} keys in the source, ${target[kind] ?? 0} in the target`)
  }
  let indexesChecked = 0
  for (const [scope, terms] of indexes) {
    for (const term of terms) {
      const query = { term: term || undefined, offset: 0, limit: 0 }
      const [a, b] = await Promise.all([from.list(scope, query), to.list(scope, query)])
      indexesChecked++
      if (a.total !== b.total)
        mismatches.push(`list ${scope}${term ? ` (${term})` : ''}: ${a.total} in the source, ${b.total} in the target`)
    }
  }
  return { source, target, copied, indexesChecked, mismatches }
}
