/**
 * `pnpm soak --instances N --redis-kills K`: N standalone servers on one Postgres (the
 * records and transcripts) and one Redis (the coordination), a mix of batch tasks submitted
 * across them, and K times, mid-load, Redis SIGKILLed and started again EMPTY (no
 * persistence: what a flushed or replaced node looks like). Then the checks: every accepted
 * task ends definitely (an unexpected outcome is a violation), none is lost (each 202 is
 * listed) or run twice (one prompt and at most one result in its events), each workspace's
 * transcript is dense, and no answer or request log line is a 5xx other than 503.
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { dockerRuntime } from '@berth/adapter-docker'
import { podmanRuntime } from '@berth/adapter-podman'
import { ensureEngines, findRepoRoot, startPostgres, startRedis } from '@berth/testkit'
import { apiClient, newCaller, TERMINAL, type ApiClient, type Json } from './api.js'
import { EXPECTED, pages } from './checks.js'
import { pick, random } from './mix.js'
import type { SoakConfig, SoakResult } from './run.js'
import { logLines, startStandalone, type Standalone } from './standalone.js'

/** How long Redis stays down on each kill. */
const REDIS_DOWN_MS = 3_000

/**
 * Run the multi-instance soak with Redis kills. Resolves with the figures and every
 * violation found (none: pass).
 *
 * @example
 * ```ts
 * const { violations } = await runClusterSoak({ ...DEFAULT_CONFIG, instances: 3, redisKills: 2, tasks: 60 })
 * ```
 */
export async function runClusterSoak(config: SoakConfig): Promise<SoakResult> {
  const cleanups: (() => Promise<unknown>)[] = []
  try {
    return await soak(config, (fn) => cleanups.push(fn))
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch(() => {})
  }
}

async function soak(config: SoakConfig, onCleanup: (fn: () => Promise<unknown>) => void): Promise<SoakResult> {
  const rand = random(config.seed)
  const started = performance.now()
  const [info] = ensureEngines([config.engine])
  if (!info) throw new Error(`no ${config.engine} engine`)
  const outside =
    config.engine === 'docker'
      ? dockerRuntime({ socketPath: info.socketPath })
      : podmanRuntime({ socketPath: info.socketPath })
  const pg = await startPostgres()
  onCleanup(() => pg.stop())
  const redis = await startRedis()
  onCleanup(() => redis.stop())
  const pool = `soak-${process.pid}-${randomBytes(3).toString('hex')}`
  const adminToken = `soak-admin-${randomBytes(12).toString('hex')}`
  const common = {
    BERTH_ADMIN_TOKEN: adminToken,
    BERTH_STORAGE: 'postgres',
    BERTH_DATABASE_URL: pg.url,
    BERTH_REDIS_URL: redis.path,
    // Every instance of a deployment shares the key its secrets are encrypted with.
    BERTH_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    BERTH_RUNTIME: config.engine,
    BERTH_IMAGE: info.image,
    BERTH_POOL_MIN: String(config.poolMin),
    BERTH_POOL_MAX: String(config.poolMax),
    BERTH_CONCURRENCY: '100',
    BERTH_RATE_RPM: '1000000',
    BERTH_RATE_BURST: '100000',
    BERTH_CACHE_DIR: join(findRepoRoot(), '.tmp', 'berth-cache'),
  }
  const servers: Standalone[] = []
  onCleanup(async () => {
    for (const s of servers) if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill('SIGKILL')
    for (let i = 0; i < servers.length; i++)
      for (const c of await outside.list({ labels: { 'berth.pool': `${pool}-${i}` } })) await outside.remove(c.id)
    await outside.close?.()
  })
  const logDir = join(findRepoRoot(), '.tmp', 'soak', pool)
  onCleanup(async () => {
    mkdirSync(logDir, { recursive: true })
    for (const [i, s] of servers.entries())
      writeFileSync(join(logDir, `instance-${i}.log`), s.lines.map((l) => `${l.stream}: ${l.text}`).join('\n'))
  })
  for (let i = 0; i < config.instances; i++) {
    const dataDir = mkdtempSync(join(tmpdir(), `berth-soak-${i}-`))
    onCleanup(async () => rmSync(dataDir, { recursive: true, force: true }))
    const env = { ...common, BERTH_DATA_DIR: dataDir, BERTH_POOL_NAME: `${pool}-${i}`, BERTH_INSTANCE_ID: `soak-${i}` }
    servers.push(await startStandalone(env))
  }
  const { api: first, profileId } = await newCaller(servers[0]!.url, adminToken)
  const token = first.token
  const apis: ApiClient[] = servers.map((s) => apiClient(s.url, token))

  /** Call until the server answers (never status 0); a 503 while Redis is down is asked again after a while. */
  let refused503 = 0
  const call = async (api: ApiClient, method: string, path: string, json?: unknown) => {
    for (let i = 0; ; i++) {
      const r = await api.call(method, path, json)
      if (r.status === 503) refused503++
      if ((r.status !== 0 && r.status !== 503) || i > 100) return r
      await new Promise((res) => setTimeout(res, 250))
    }
  }

  // Redis dies at fixed points of the submission order, spread over the run.
  const killAt = new Set(
    Array.from({ length: config.redisKills }, (_, i) => Math.floor(((i + 1) * config.tasks) / (config.redisKills + 1))),
  )
  let kills = 0
  let outage: Promise<void> = Promise.resolve()
  const killRedis = async () => {
    await redis.kill()
    kills++
    config.log(`soak: Redis SIGKILLed ${kills}/${config.redisKills}; back empty in ${REDIS_DOWN_MS} ms`)
    await new Promise((r) => setTimeout(r, REDIS_DOWN_MS))
    await redis.start()
    // Up for as long before the next kill, so that the instances see it back (and empty).
    await new Promise((r) => setTimeout(r, REDIS_DOWN_MS))
  }

  const accepted: { id: string; kind: string; via: number }[] = []
  const refused: string[] = []
  let submitted = 0
  const work = Array.from({ length: config.tasks }, () => pick(rand))
  const worker = async () => {
    for (let k = work.shift(); k; k = work.shift()) {
      const n = submitted++
      if (killAt.has(n)) outage = outage.then(killRedis)
      const via = n % servers.length
      const r = await call(apis[via]!, 'POST', '/v1/tasks', { mode: 'batch', profile_id: profileId, ...k.body })
      if (r.status !== 202) {
        refused.push(`a ${k.kind} submit: ${r.status} ${JSON.stringify(r.body)}`)
        continue
      }
      const id = r.body.task_id as string
      accepted.push({ id, kind: k.kind, via })
      for (;;) {
        const t = await call(apis[via]!, 'GET', `/v1/tasks/${id}`)
        if ((TERMINAL as readonly string[]).includes(t.body.status)) break
        await new Promise((res) => setTimeout(res, 500))
      }
    }
  }
  await Promise.all(Array.from({ length: config.concurrency }, worker))
  await outage
  const submittedMs = Math.round(performance.now() - started)

  const violations = [...refused]
  const list = (api: ApiClient) => pages<Json>((m, p) => call(api, m, p), '/v1/tasks', 'tasks', 'page')
  const all = await list(apis[servers.length - 1]!)
  const byId = new Map(all.map((t) => [t.task_id as string, t]))
  const outcomes: Record<string, number> = {}
  for (const t of accepted) {
    const got = byId.get(t.id)
    if (!got) {
      violations.push(`task ${t.id} was accepted (202) but no instance lists it`)
      continue
    }
    const outcome = got.status === 'failed' ? `failed:${got.error?.code}` : (got.status as string)
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
    if (![EXPECTED[t.kind], 'failed:CONTAINER_FAILED'].includes(outcome))
      violations.push(`task ${t.id} (${t.kind}) ended ${outcome}${got.error ? `: ${got.error.error}` : ''}`)
    const events = await pages<Json>((m, p) => call(apis[0]!, m, p), `/v1/tasks/${t.id}/events`, 'events', 'after')
    const prompts = events.filter((e) => e.type === 'user_message').length
    const results = events.filter((e) => e.type === 'result').length
    if (prompts !== 1 || results > 1)
      violations.push(`task ${t.id}: ${prompts} prompts and ${results} results: run twice`)
  }
  for (const t of all)
    if (!(TERMINAL as readonly string[]).includes(t.status)) violations.push(`task ${t.task_id} stuck in ${t.status}`)
  let events = 0
  for (const ws of new Set(all.map((t) => t.workspace_id as string))) {
    const log = await pages<Json>((m, p) => call(apis[0]!, m, p), `/v1/workspaces/${ws}/transcript`, 'events', 'after')
    events += log.length
    const bad = log.findIndex((e, i) => e.seq !== i + 1)
    if (bad >= 0) violations.push(`workspace ${ws}: event ${bad} has seq ${log[bad]!.seq}: a gap or a duplicate`)
  }
  const statuses = apis.flatMap((a) => a.statuses)
  const fivexx = statuses.filter((s) => s >= 500 && s !== 503).length
  if (fivexx) violations.push(`${fivexx} answers were a 5xx other than 503`)
  servers.forEach((s, i) => {
    for (const line of logLines(s.lines)) {
      if (line.msg === 'request' && typeof line.status === 'number' && line.status >= 500 && line.status !== 503)
        violations.push(`instance ${i}: ${line.status} on ${String(line.method)} ${String(line.path)}`)
    }
  })
  for (const s of servers) s.child.kill('SIGTERM')
  await Promise.all(servers.map((s) => s.exited))
  config.log(`soak: server logs in ${logDir}`)
  const figures: Record<string, number | string> = {
    engine: config.engine,
    seed: config.seed,
    instances: servers.length,
    redis_sigkills: kills,
    duration_s: Math.round((performance.now() - started) / 100) / 10,
    submitting_s: Math.round(submittedMs / 100) / 10,
    tasks: all.length,
    ...Object.fromEntries(Object.entries(outcomes).map(([k, v]) => [`outcome ${k}`, v])),
    events_checked: events,
    http_requests: statuses.length,
    http_503_retried: refused503,
    http_5xx_not_503: fivexx,
    violations: violations.length,
  }
  return { figures, violations }
}
