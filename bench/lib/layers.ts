/**
 * The per-layer CPU table of the HTTP benchmark: one more window against a standalone server
 * started with `--cpu-prof`, its samples in that window attributed to layers
 * (bench/lib/cpu-layers.ts), each share multiplied by the CPU µs per request measured
 * without the profiler.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { layerShares } from './cpu-layers.js'
import { measure, type WindowOptions } from './measure.js'
import { startStandalone } from './standalone-host.js'
import { int, table } from './table.js'

/** One layer's part of a request. */
export interface LayerRow {
  layer: string
  /** Share of the profile's non-idle samples in the window. */
  share: number
  /** The share times the unprofiled CPU µs per request. */
  usPerRequest: number
}

/**
 * Profile the standalone server over one window and print the layer table; `usPerRequest` is
 * the standalone row's CPU µs per request from the unprofiled rounds.
 *
 * @example
 * ```ts
 * const rows = await layerBreakdown({ connections: 32, warmupMs: 2000, durationMs: 5000 }, 60)
 * ```
 */
export async function layerBreakdown(opts: WindowOptions, usPerRequest: number): Promise<LayerRow[]> {
  // BENCH_PROFILE_DIR keeps the profile (to open in DevTools); otherwise a temp dir, removed after.
  const kept = process.env.BENCH_PROFILE_DIR
  if (kept) mkdirSync(kept, { recursive: true })
  const dir = kept ?? mkdtempSync(join(tmpdir(), 'berth-bench-prof-'))
  try {
    process.stdout.write('  measuring Berth (pnpm start) under --cpu-prof for the layer table …')
    const host = await startStandalone(['--cpu-prof', `--cpu-prof-dir=${dir}`])
    let profiled: number
    try {
      profiled = (await measure(host, opts)).serverCpuUsPerRequest
    } finally {
      await host.close()
    }
    process.stdout.write(` ${int(profiled)} CPU µs/req with the profiler\n`)
    const rows = layerShares(dir, host.windows).map((s) => ({
      layer: s.layer,
      share: s.share,
      usPerRequest: s.share * usPerRequest,
    }))
    console.log()
    console.log(
      table(
        ['layer (standalone server)', 'share of CPU', 'CPU µs/req'],
        rows.map((r) => [r.layer, `${(r.share * 100).toFixed(1)}%`, r.usPerRequest.toFixed(1)]),
      ),
    )
    console.log(
      `  shares from --cpu-prof samples in the window (innermost recognised frame wins), times the ` +
        `unprofiled ${usPerRequest.toFixed(1)} µs/req; load average ${loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}`,
    )
    return rows
  } finally {
    if (!kept) rmSync(dir, { recursive: true, force: true })
  }
}
