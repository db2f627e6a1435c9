/**
 * `pnpm soak`: Berth's own chaos soak (see run.ts). Options as flags or environment:
 *
 *   pnpm soak                                   # the default mix on Docker
 *   pnpm soak --engine podman --tasks 240 --server-kills 4 --container-kills 2
 *   SOAK_TASKS=40 SOAK_SEED=7 pnpm soak
 *   pnpm soak --instances 3 --redis-kills 2     # three servers on Postgres + Redis, Redis killed twice
 *   pnpm soak --hostile 2 --tasks 30            # two rounds of the attacks (hostile.ts) beside the mix
 *
 * The hostile mix judges each attack's outcome exactly, so it runs without server or
 * container kills (asking for both is refused).
 *
 * Prints the figures; exits 1 (listing each violation) when a check fails.
 */
import { loadavg } from 'node:os'
import { parseArgs } from 'node:util'
import { runClusterSoak } from './cluster.js'
import { hostileTable } from './hostile.js'
import { DEFAULT_CONFIG, runSoak, type SoakConfig } from './run.js'

const NUMERIC = [
  'tasks',
  'sessions',
  'follow-ups',
  'concurrency',
  'cancel-rate',
  'server-kills',
  'container-kills',
  'pool-min',
  'pool-max',
  'seed',
  'instances',
  'redis-kills',
  'hostile',
] as const
const { values } = parseArgs({
  options: { engine: { type: 'string' }, ...Object.fromEntries(NUMERIC.map((k) => [k, { type: 'string' as const }])) },
})
const camel = (k: string) => k.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())
const config: SoakConfig = { ...DEFAULT_CONFIG }
for (const key of NUMERIC) {
  const raw =
    (values as Record<string, string | undefined>)[key] ?? process.env[`SOAK_${key.toUpperCase().replace(/-/g, '_')}`]
  if (raw === undefined) continue
  const n = Number(raw)
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${key} must be a non-negative number, got ${raw}`)
  ;(config as unknown as Record<string, number>)[camel(key)] = n
}
const engine = values.engine ?? process.env.SOAK_ENGINE
if (engine !== undefined) {
  if (engine !== 'docker' && engine !== 'podman') throw new Error(`--engine must be docker or podman, got ${engine}`)
  config.engine = engine
}

const several = config.instances > 1 || config.redisKills > 0
if (config.hostile > 0) {
  const asked = (k: string) =>
    (values as Record<string, unknown>)[k] !== undefined || process.env[`SOAK_${k.toUpperCase().replace(/-/g, '_')}`]
  if (several || (asked('server-kills') && config.serverKills) || (asked('container-kills') && config.containerKills))
    throw new Error('--hostile runs on one instance without server or container kills')
  config.serverKills = 0
  config.containerKills = 0
}
const { figures, violations, attacks } = await (several ? runClusterSoak(config) : runSoak(config))
console.log('\nsoak figures')
for (const [k, v] of Object.entries(figures)) console.log(`  ${k.padEnd(32)} ${v}`)
if (attacks?.length)
  console.log(
    `\nhostile mix (load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')})\n${hostileTable(attacks).join('\n')}`,
  )
if (violations.length) {
  console.log(`\n${violations.length} violation(s):`)
  for (const v of violations) console.log(`  - ${v}`)
  process.exit(1)
}
console.log(
  several
    ? '\nsoak passed: every task definite, none lost or run twice, logs dense, no 5xx but 503'
    : '\nsoak passed: every task definite, logs dense, stream equal to storage, no 5xx, no error line, no orphan',
)
