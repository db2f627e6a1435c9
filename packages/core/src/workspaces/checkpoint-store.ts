/**
 * Where a session's checkpoints live: their index in the Store (the truth every instance
 * reads), their manifests, the reference counts of their contents and the contents
 * themselves in the BlobStore, one object per distinct content.
 */
import { gunzipSync, gzipSync } from 'node:zlib'
import type { BlobStore } from '../ports/blob-store.js'
import type { Store } from '../ports/store.js'
import type { ManifestEntry } from './checkpoint-tar.js'

/** One checkpoint in its session's index. */
export interface CheckpointRecord {
  task_id: string
  created_at: string
  /** The conversation as the task left it (null: none yet). */
  sdk_session_id: string | null
  /** The transcript's last `seq` when it was kept: the events up to and including its task. */
  seq: number
  /** Regular files, and their bytes. */
  files: number
  bytes: number
  /** New contents and the manifest: what it cost in storage. */
  added_bytes: number
}

/** What a commit changes besides the index: a new checkpoint's manifest counted in, dropped ones' counted out. */
export interface CheckpointChange {
  /** The session's reference counts as read before the change (updated in place). */
  refs: Map<string, number>
  added?: readonly ManifestEntry[]
  dropped: readonly CheckpointRecord[]
}

const indexKey = (owner: string, ws: string) => `ws-checkpoints:${owner}:${ws}`
const dir = (owner: string, ws: string) => `checkpoints/${owner}/${ws}`
const objectKey = (owner: string, ws: string, hash: string) => `${dir(owner, ws)}/objects/${hash}`
const manifestKey = (owner: string, ws: string, taskId: string) => `${dir(owner, ws)}/manifests/${taskId}.json.gz`
const refsKey = (owner: string, ws: string) => `${dir(owner, ws)}/refs.json.gz`

/** Removals in flight at once. */
const PARALLEL = 16

/**
 * The storage of checkpoints. Contents are keyed by their sha256 per session, so a checkpoint
 * costs its changed files and its manifest; each content counts the manifests that name it
 * and goes when none does. One writer per session at a time (its run, a rewind, a deletion:
 * see `Checkpoints`).
 *
 * @example
 * ```ts
 * const store = new CheckpointStore(records, blobs)
 * await store.putObject('usr_1', 'ws_1', hash, bytes)
 * await store.commit('usr_1', 'ws_1', [...items, record], { refs, added: entries, dropped: [] })
 * ```
 */
export class CheckpointStore {
  constructor(
    private readonly store: Store,
    private readonly blobs: BlobStore,
  ) {}

  /** The session's checkpoints, oldest first. */
  async index(owner: string, ws: string): Promise<CheckpointRecord[]> {
    return (await this.store.get<{ items: CheckpointRecord[] }>(indexKey(owner, ws)))?.items ?? []
  }

  /** How many kept manifests name each content of the session. */
  async refs(owner: string, ws: string): Promise<Map<string, number>> {
    const stored = await this.blobs.get(refsKey(owner, ws))
    if (!stored) return new Map()
    return new Map(Object.entries(JSON.parse(gunzipSync(stored).toString('utf8')) as Record<string, number>))
  }

  putObject(owner: string, ws: string, hash: string, bytes: Uint8Array): Promise<void> {
    return this.blobs.put(objectKey(owner, ws, hash), bytes)
  }

  object(owner: string, ws: string, hash: string): Promise<Uint8Array | null> {
    return this.blobs.get(objectKey(owner, ws, hash))
  }

  async removeObjects(owner: string, ws: string, hashes: Iterable<string>): Promise<void> {
    await removeAll(hashes, (hash) => this.blobs.remove(objectKey(owner, ws, hash)))
  }

  /** Store a checkpoint's manifest (gzipped JSON); resolves the bytes it takes. */
  async putManifest(owner: string, ws: string, taskId: string, entries: readonly ManifestEntry[]): Promise<number> {
    const bytes = gzipSync(JSON.stringify(entries))
    await this.blobs.put(manifestKey(owner, ws, taskId), bytes)
    return bytes.byteLength
  }

  async manifest(owner: string, ws: string, taskId: string): Promise<ManifestEntry[] | null> {
    const stored = await this.blobs.get(manifestKey(owner, ws, taskId))
    return stored ? (JSON.parse(gunzipSync(stored).toString('utf8')) as ManifestEntry[]) : null
  }

  /**
   * Make `items` the session's checkpoints: the counts written first, then the index, then
   * the contents no manifest names any more and the dropped manifests removed (a crash in
   * between leaves unreferenced contents behind, never a checkpoint without its own).
   */
  async commit(owner: string, ws: string, items: readonly CheckpointRecord[], change: CheckpointChange): Promise<void> {
    const { refs } = change
    for (const e of change.added ?? []) if (e.hash) refs.set(e.hash, (refs.get(e.hash) ?? 0) + 1)
    const garbage = new Set<string>()
    // Nothing kept: every content goes, whatever counted it.
    for (const dropped of items.length ? change.dropped : []) {
      for (const e of (await this.manifest(owner, ws, dropped.task_id)) ?? []) {
        if (!e.hash || !refs.has(e.hash)) continue
        const left = refs.get(e.hash)! - 1
        if (left > 0) refs.set(e.hash, left)
        else {
          refs.delete(e.hash)
          garbage.add(e.hash)
        }
      }
    }
    if (items.length === 0) {
      for (const hash of refs.keys()) garbage.add(hash)
      await this.store.remove(indexKey(owner, ws))
      await this.blobs.remove(refsKey(owner, ws))
    } else {
      await this.blobs.put(refsKey(owner, ws), gzipSync(JSON.stringify(Object.fromEntries(refs))))
      await this.store.set(indexKey(owner, ws), { items })
    }
    await this.removeObjects(owner, ws, garbage)
    await removeAll(
      change.dropped.map((d) => d.task_id),
      (taskId) => this.blobs.remove(manifestKey(owner, ws, taskId)),
    )
  }

  /** Every checkpoint of the session, with its contents (the workspace is deleted). */
  async removeAll(owner: string, ws: string): Promise<void> {
    const items = await this.index(owner, ws)
    await this.commit(owner, ws, [], { refs: await this.refs(owner, ws), dropped: items })
  }
}

async function removeAll(keys: Iterable<string>, remove: (key: string) => Promise<void>): Promise<void> {
  const all = [...keys]
  for (let i = 0; i < all.length; i += PARALLEL) await Promise.all(all.slice(i, i + PARALLEL).map(remove))
}
