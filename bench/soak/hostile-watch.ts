/**
 * What the hostile mix watches while the attacks run: `/health` answering (every 250 ms,
 * p99 and failures), another caller's one-line probe tasks finishing in normal time (against
 * a baseline taken before the attacks) and the host's free disk space under the data dir.
 */
import { lstatSync, readdirSync, statfsSync } from 'node:fs'
import { join } from 'node:path'
import { type ApiClient, newCaller, TERMINAL } from './api.js'

/** One attack's (or check's) verdict: a row of the violations table. */
export interface AttackRow {
  attack: string
  expected: string
  got: string
  ok: boolean
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const GiB = 1024 ** 3

/** A probe slower than this many times the baseline median (plus a fixed margin) is a violation. */
export const PROBE_FACTOR = 4
export const PROBE_MARGIN_MS = 15_000
/**
 * Berth's data dir (workspace disks, snapshots, database) may grow by this much at most
 * while the attacks write gigabytes; the host's free space (shared with everything else on
 * the machine, so noisy) by at most what one 2 GiB `fallocate` that got through would take.
 */
export const DATA_GROWTH_MAX = 1 * GiB
export const FREE_DROP_MAX = 2 * GiB
/**
 * `/health` must answer every call, with a p99 under this (ms) or under twice its p99 before
 * the attacks, whichever is more (a shared machine's load is not the attacks' doing).
 */
export const HEALTH_P99_MS = 250

/**
 * One probe task of the second caller, submit to end, in milliseconds (`null`: it did not
 * complete); `waited` collects why it was queued, if it was.
 */
async function probe(api: ApiClient, profileId: string, waited: Set<string>): Promise<number | null> {
  const t0 = performance.now()
  const r = await api.call('POST', '/v1/tasks', {
    mode: 'batch',
    profile_id: profileId,
    prompt: 'Probe [[berth:text ok]]',
  })
  if (r.status !== 202) return null
  for (;;) {
    const t = (await api.call('GET', `/v1/tasks/${r.body.task_id}`)).body
    if (t.waiting?.reason) waited.add(t.waiting.reason as string)
    if ((TERMINAL as readonly string[]).includes(t.status))
      return t.status === 'completed' ? Math.round(performance.now() - t0) : null
    await sleep(100)
  }
}

/**
 * Bytes allocated under `dir` on its own filesystem: a sparse disk image counts what it
 * holds, and the disks mounted under it (the agents' workspaces) are not walked, so an
 * agent swapping its files meanwhile cannot trip the walk. Entries that vanish are skipped.
 */
function allocated(dir: string, dev = lstatSync(dir).dev): number {
  let total = 0
  let entries: string[]
  try {
    entries = readdirSync(dir)
  } catch {
    return 0 // gone meanwhile
  }
  for (const name of entries) {
    const path = join(dir, name)
    try {
      const st = lstatSync(path)
      if (st.dev !== dev) continue
      if (st.isDirectory()) total += allocated(path, dev)
      else if (st.isFile()) total += st.blocks * 512
    } catch {} // gone meanwhile
  }
  return total
}

const freeBytes = (dir: string) => {
  const s = statfsSync(dir)
  return s.bavail * s.bsize
}
const quantile = (xs: number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
}

export interface HostileWatch {
  /** Stop watching (after the probe in flight) and judge what was seen. */
  stop(): Promise<{ rows: AttackRow[]; figures: Record<string, number | string> }>
}

/**
 * Take the probes' baseline (three in a row, nothing hostile running yet), then watch until `stop`.
 *
 * @example
 * ```ts
 * const watch = await startWatch({ url, adminToken, dataDir, log })
 * // ... attacks ...
 * const { rows, figures } = await watch.stop()
 * ```
 */
export async function startWatch(o: {
  url: string
  adminToken: string
  dataDir: string
  log: (line: string) => void
}): Promise<HostileWatch> {
  const { api, profileId } = await newCaller(o.url, o.adminToken)
  const freeAtStart = freeBytes(o.dataDir)
  let minFree = freeAtStart
  const dataAtStart = allocated(o.dataDir)
  let maxData = dataAtStart
  let samples = 0
  let stopped = false
  // `/health` is timed from the start: the calls made while the baseline probes run (the
  // normal mix only) are what the calls under the attacks are compared with.
  let health: number[] = []
  let healthFailed = 0
  const healthLoop = (async () => {
    while (!stopped) {
      const t0 = performance.now()
      const ok = await fetch(`${o.url}/health`, { signal: AbortSignal.timeout(5_000) })
        .then((r) => r.ok)
        .catch(() => false)
      if (ok) health.push(performance.now() - t0)
      else healthFailed++
      minFree = Math.min(minFree, freeBytes(o.dataDir))
      // Walking the data dir costs more than a statfs: every 2 s.
      if (samples++ % 8 === 0) maxData = Math.max(maxData, allocated(o.dataDir))
      await sleep(250)
    }
  })()
  const baseline: number[] = []
  const waited = new Set<string>()
  for (let i = 0; i < 3; i++) {
    const ms = await probe(api, profileId, new Set())
    if (ms === null) throw new Error('a baseline probe task did not complete')
    baseline.push(ms)
  }
  const base = quantile(baseline, 0.5)
  const bound = PROBE_FACTOR * base + PROBE_MARGIN_MS
  const healthBefore = Math.round(quantile(health, 0.99))
  const healthBound = Math.max(HEALTH_P99_MS, 2 * healthBefore)
  health = []
  o.log(
    `soak: probe baseline ${baseline.join(' ')} ms (a probe over ${bound} ms is a violation); /health p99 ${healthBefore} ms (${healthBound} ms is a violation)`,
  )
  const probes: (number | null)[] = []
  const probeLoop = (async () => {
    while (!stopped) probes.push(await probe(api, profileId, waited))
  })()
  return {
    async stop() {
      stopped = true
      await Promise.all([healthLoop, probeLoop])
      const done = probes.filter((p): p is number => p !== null)
      const slow = done.filter((p) => p > bound).length
      const p99 = Math.round(quantile(health, 0.99))
      const drop = freeAtStart - minFree
      const growth = maxData - dataAtStart
      const mib = (n: number) => `${Math.round(n / 1048576)} MiB`
      const rows: AttackRow[] = [
        {
          attack: "another caller's probe tasks",
          expected: `all completed, each under ${bound} ms`,
          got: `${done.length}/${probes.length} completed, ${slow} slow, max ${Math.max(0, ...done)} ms, waited for: ${[...waited].join(' ') || 'nothing'}`,
          ok: done.length === probes.length && probes.length > 0 && slow === 0,
        },
        {
          attack: '/health throughout',
          expected: `every call answered, p99 under ${healthBound} ms`,
          got: `${health.length} answered, ${healthFailed} failed, p99 ${p99} ms (before the attacks: ${healthBefore} ms)`,
          ok: healthFailed === 0 && p99 < healthBound,
        },
        {
          attack: 'host disk',
          expected: `data dir grows under ${DATA_GROWTH_MAX / GiB} GiB, free space drops under ${FREE_DROP_MAX / GiB} GiB`,
          got: `data dir grew ${mib(growth)}, free space dropped ${mib(drop)} at most`,
          ok: growth < DATA_GROWTH_MAX && drop < FREE_DROP_MAX,
        },
      ]
      return {
        rows,
        figures: {
          probe_baseline_ms: baseline.join(' '),
          probes: probes.length,
          probe_p50_ms: quantile(done, 0.5),
          probe_max_ms: Math.max(0, ...done),
          health_calls: health.length,
          health_p99_ms_before: healthBefore,
          health_p99_ms: p99,
          host_free_drop_mib: Math.round(drop / 1048576),
          data_dir_growth_mib: Math.round(growth / 1048576),
        },
      }
    },
  }
}
