/**
 * A running server's mark in its data dir (`<dataDir>/server.lease`): written at start,
 * rewritten every 10 s, deleted on a clean stop (and when the process exits). `prune`
 * refuses while the mark is younger than 30 s. A file rather than a process id, so that it
 * holds wherever the data dir is shared: a server in a container and `prune` in another,
 * or on another host over a network filesystem. A server killed outright leaves it behind;
 * it lapses 30 s after the last rewrite.
 */
import { randomUUID } from 'node:crypto'
import { readFileSync, rmSync } from 'node:fs'
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'

/** The lease's file name in the data dir. */
export const SERVER_LEASE_FILE = 'server.lease'
/** How long a lease holds after its last rewrite. */
export const SERVER_LEASE_MS = 30_000
const RENEW_MS = 10_000

/** What the lease file says about the server holding it. */
export interface LeaseHolder {
  pid: number | null
  host: string | null
  startedAt: string | null
  /** Since the last rewrite. */
  ageMs: number
}

/**
 * Hold the lease of `dataDir` until `release()` (or the process exits).
 *
 * @example
 * ```ts
 * const lease = await holdServerLease('./.data')
 * // ... serve; on shutdown:
 * await lease.release()
 * ```
 */
export async function holdServerLease(dataDir: string, renewMs = RENEW_MS): Promise<{ release(): Promise<void> }> {
  const file = join(dataDir, SERVER_LEASE_FILE)
  const token = randomUUID()
  const body = JSON.stringify({ pid: process.pid, host: hostname(), started_at: new Date().toISOString(), token })
  await mkdir(dataDir, { recursive: true })
  await writeFile(file, body)
  // Rewritten, not touched: a lease file deleted meanwhile comes back.
  const timer = setInterval(() => void writeFile(file, body).catch(() => {}), renewMs)
  timer.unref()
  const drop = () => {
    clearInterval(timer)
    // Only our own: another server started on the same data dir since keeps its lease.
    try {
      if ((JSON.parse(readFileSync(file, 'utf8')) as { token?: string }).token === token) rmSync(file, { force: true })
    } catch {
      // gone already, or not ours to read
    }
  }
  process.once('exit', drop)
  return {
    async release() {
      process.removeListener('exit', drop)
      drop()
    },
  }
}

/**
 * The server holding `dataDir`'s lease, or null when none does (no lease file, or one not
 * rewritten for {@link SERVER_LEASE_MS}).
 *
 * @example
 * ```ts
 * const holder = await serverHolding('./.data') // { pid: 4242, host: 'build-01', … } while it runs
 * ```
 */
export async function serverHolding(dataDir: string, now = Date.now()): Promise<LeaseHolder | null> {
  const file = join(dataDir, SERVER_LEASE_FILE)
  const info = await stat(file).catch(() => null)
  if (!info || now - info.mtimeMs > SERVER_LEASE_MS) return null
  // Read while being rewritten, it may be empty: still a live lease, its holder unknown.
  const said = await readFile(file, 'utf8')
    .then((text) => JSON.parse(text) as { pid?: number; host?: string; started_at?: string })
    .catch(() => ({}) as { pid?: number; host?: string; started_at?: string })
  return {
    pid: said.pid ?? null,
    host: said.host ?? null,
    startedAt: said.started_at ?? null,
    ageMs: Math.max(0, now - info.mtimeMs),
  }
}
