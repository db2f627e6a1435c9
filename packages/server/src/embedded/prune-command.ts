/**
 * `prune`: remove everything a deployment left on its runtimes, for an operator who stops it
 * for good or moves its data dir. The standalone server's `pnpm run prune` runs it (and
 * `node dist/main.js prune` in the server image):
 *
 *   pnpm --filter @berth/standalone-server run prune --dry-run   # list only
 *   pnpm --filter @berth/standalone-server run prune             # list, then remove
 *
 * The deployment is the one the settings name (README "Configuration", read from `cwd` as
 * `pnpm start` reads them): its pool name (`BERTH_POOL_NAME`, else derived from the data dir)
 * is the `berth.pool` label of its containers and volumes. See `pruneDeployment` for what
 * goes; the data dir itself (records, keys) stays. Refused while a server of the deployment
 * runs: its data dir's lease (server-lease.ts), or, with Redis coordination, its instance id
 * (`BERTH_INSTANCE_ID`, else host name and pool name) alive there.
 *
 * Exit codes: 0 done (or listed), 1 something could not be removed or read, 2 a usage
 * error, 3 refused (a server of this deployment is running).
 */
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { defaultPoolName, pruneDeployment, type PruneItem } from '@berth/core'
import { instanceAlive, instanceIdFor } from './coordination-choice.js'
import { pruneTargets } from './runtime-choice.js'
import { serverHolding } from './server-lease.js'
import { loadSettings } from './settings.js'

const USAGE = 'usage: prune [--dry-run]'

/** One line per item: `container  berth-3f9a0c12ab34 (docker): running, disk /…/berth-3f9a0c12ab34`. */
function line(item: PruneItem): string {
  return `  ${item.kind.padEnd(9)} ${item.name}${item.runtime ? ` (${item.runtime})` : ''}${item.detail ? `: ${item.detail}` : ''}`
}

/**
 * Run `prune` with command-line `args`, settings read from `cwd`. Logs to `log` and `error`
 * (default the console) and resolves with the exit code (0; 1 failures; 2 usage; 3 refused).
 *
 * @example
 * ```ts
 * process.exitCode = await pruneCommand(['--dry-run'], process.cwd())
 * ```
 */
export async function pruneCommand(
  args: string[],
  cwd: string,
  io: { log?: (line: string) => void; error?: (line: string) => void; env?: NodeJS.ProcessEnv } = {},
): Promise<number> {
  const { log = console.log, error = console.error, env = process.env } = io
  let dryRun: boolean
  try {
    dryRun = parseArgs({ args, options: { 'dry-run': { type: 'boolean', default: false } }, strict: true }).values[
      'dry-run'
    ]
  } catch (err) {
    error(`prune: ${(err as Error).message}\n${USAGE}`)
    return 2
  }
  const opened: { runtime: { close?(): Promise<void> } }[] = []
  try {
    const { config } = await loadSettings(cwd, env)
    const dataDir = resolve(cwd, config.dataDir)
    const pool = config.poolName ?? defaultPoolName(dataDir)
    const diskDir = config.diskDir === null ? null : resolve(cwd, config.diskDir ?? join(dataDir, 'disks'))
    const holder = await serverHolding(dataDir)
    if (holder) {
      const who = [holder.pid && `pid ${holder.pid}`, holder.host && `on ${holder.host}`].filter(Boolean).join(' ')
      error(
        `prune: refused: a server of this deployment is running${who ? ` (${who})` : ''}: its lease in ${dataDir} was renewed ${Math.round(holder.ageMs / 1000)} s ago. Stop it first (a server killed outright: its lease lapses 30 s after).`,
      )
      return 3
    }
    const instance = instanceIdFor(config, pool)
    if (await instanceAlive(config, instance)) {
      error(
        `prune: refused: instance ${instance} of this deployment is alive on its Redis (prefix ${config.redisPrefix}). Stop it first (a killed instance: its lease lapses 30 s after).`,
      )
      return 3
    }
    const targets = await pruneTargets({ ...config, dataDir }, env)
    opened.push(...targets)
    const on = targets.map((t) => t.description).join(', ') || 'no runtime (none answers or has its containers)'
    log(`prune: deployment ${pool} (label berth.pool=${pool}) on ${on}${diskDir ? `; disks in ${diskDir}` : ''}`)
    log(dryRun ? 'prune: dry run: would remove' : 'prune: removing')
    const report = await pruneDeployment({
      runtimes: targets.map(({ name, runtime }) => ({ name, runtime })),
      pool,
      diskDir,
      dryRun,
      onItem: (item) => log(line(item)),
    })
    for (const { item, error: why } of report.failures) error(`prune: could not remove ${line(item).trim()}: ${why}`)
    const n = report.items.length
    if (dryRun) log(`prune: dry run: ${n} item(s) listed, nothing removed`)
    else log(`prune: removed ${n} item(s)${report.failures.length ? `, ${report.failures.length} left (above)` : ''}`)
    return report.failures.length ? 1 : 0
  } catch (err) {
    error(`prune: ${(err as Error).message}`)
    return 1
  } finally {
    for (const t of opened) await t.runtime.close?.().catch(() => {})
  }
}
