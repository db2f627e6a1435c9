import { indexEntryFor, type Store } from '@berth/core'

export type Rec = {
  id: string
  owner_id: string
  status: string
  mode: string
  created_at: string
  updated_at: string
  n: number
}

export const STATUSES = ['queued', 'running', 'completed', 'failed']
const MODES = ['batch', 'session']

export function record(owner: string, n: number, extra: Partial<Rec> = {}): Rec {
  const at = new Date(Date.UTC(2026, 0, 1) + n * 1000).toISOString()
  return {
    id: `task_${String(n).padStart(6, '0')}x`,
    owner_id: owner,
    status: STATUSES[n % STATUSES.length]!,
    mode: MODES[n % MODES.length]!,
    created_at: at,
    updated_at: at,
    n,
    ...extra,
  }
}

export const keyOf = (r: Rec) => `tasks:${r.owner_id}:${r.id}`

/** Store a task-shaped record with the entry core's list would give it. */
export async function put(store: Store, r: Rec): Promise<void> {
  await store.put(keyOf(r), r, indexEntryFor(keyOf(r), r)!)
}

/**
 * The loop a crash-test writer process runs: it creates and updates task records of owner
 * `crash` forever (status changes move them between filtered indexes), printing `ready`
 * once it has written 200 records. The test kills it with SIGKILL at a random moment.
 *
 * @example
 * ```ts
 * // writer.ts, spawned by `spawnWriter`
 * await runStoreWriter(sqliteStore(process.argv[2]!))
 * ```
 */
export async function runStoreWriter(store: Store): Promise<never> {
  for (let n = 0; ; n++) {
    const r = record('crash', n)
    await put(store, r)
    // Move an older record to another status, and remove one now and then.
    if (n > 10) {
      const old = record('crash', n - 10)
      if (n % 7 === 0) await store.remove(keyOf(old))
      else
        await put(store, { ...old, status: STATUSES[(n + 1) % STATUSES.length]!, updated_at: new Date().toISOString() })
    }
    if (n === 200) process.stdout.write('ready\n')
  }
}
