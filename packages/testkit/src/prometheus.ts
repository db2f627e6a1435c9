import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { findRepoRoot } from './engines.js'

/** What a Prometheus started for a test scrapes. */
export interface PrometheusOptions {
  /** `host:port` addresses to scrape (job `berth`). */
  targets: string[]
  /** Sent as `Authorization: Bearer …` on every scrape (a main listener's operator token). */
  bearerToken?: string
  /** Path scraped on each target (default `/metrics`). */
  metricsPath?: string
  /** Scrape interval in seconds (default 1). */
  intervalSeconds?: number
}

/** One sample of an instant query's answer. */
export interface PromSample {
  metric: Record<string, string>
  value: [number, string]
}

/** A private Prometheus on loopback, with a temporary config and data directory. */
export interface LocalPrometheus {
  /** Its HTTP address, e.g. `http://127.0.0.1:41234`. */
  url: string
  /** The directory holding `prometheus` and `promtool`. */
  binDir: string
  /** An instant query through `/api/v1/query`; throws when Prometheus answers with an error. */
  query(expr: string): Promise<PromSample[]>
  /** Asks again (every 250 ms, at most `timeoutMs`, default 30 s) until `accept` takes the answer. */
  waitFor(expr: string, accept: (samples: PromSample[]) => boolean, timeoutMs?: number): Promise<PromSample[]>
  /** Stop it and remove its directory. */
  stop(): Promise<void>
}

/** A free TCP port on loopback, as the kernel picks it. */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/**
 * Where Debian's `prometheus` and `promtool` are, installed by `scripts/prometheus/ensure.sh`
 * when missing (as root).
 *
 * @example
 * ```ts
 * execFileSync(join(prometheusBinDir(), 'promtool'), ['check', 'rules', 'alerts.yml'])
 * ```
 */
export function prometheusBinDir(): string {
  return execFileSync('bash', [join(findRepoRoot(), 'scripts/prometheus/ensure.sh')], { encoding: 'utf8' }).trim()
}

/**
 * Run `promtool` with `args` (and `input` on its stdin); resolves to its output, rejects
 * with its output when it fails (e.g. `promtool check metrics` finding a problem).
 *
 * @example
 * ```ts
 * await promtool(['check', 'metrics'], exposition)
 * ```
 */
export function promtool(args: string[], input?: string): Promise<string> {
  const child = spawn(join(prometheusBinDir(), 'promtool'), args, { stdio: ['pipe', 'pipe', 'pipe'] })
  let out = ''
  child.stdout.on('data', (d: Buffer) => (out += d.toString()))
  child.stderr.on('data', (d: Buffer) => (out += d.toString()))
  child.stdin.end(input ?? '')
  return new Promise((resolve, reject) =>
    child.once('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`promtool ${args.join(' ')} exited ${code}: ${out}`)),
    ),
  )
}

/**
 * Start Debian's Prometheus on a free loopback port, scraping `targets` every second, with
 * its config and TSDB in a temporary directory; `stop()` ends it and removes the directory.
 *
 * @example
 * ```ts
 * const prom = await startPrometheus({ targets: ['127.0.0.1:9464'] })
 * const up = await prom.waitFor('up{job="berth"}', (s) => s[0]?.value[1] === '1')
 * await prom.stop()
 * ```
 */
export async function startPrometheus(opts: PrometheusOptions): Promise<LocalPrometheus> {
  const binDir = prometheusBinDir()
  const dir = mkdtempSync(join(tmpdir(), 'berth-prometheus-'))
  const interval = `${opts.intervalSeconds ?? 1}s`
  const config = {
    global: { scrape_interval: interval, evaluation_interval: interval },
    scrape_configs: [
      {
        job_name: 'berth',
        metrics_path: opts.metricsPath ?? '/metrics',
        ...(opts.bearerToken && { authorization: { type: 'Bearer', credentials: opts.bearerToken } }),
        static_configs: [{ targets: opts.targets }],
      },
    ],
  }
  // YAML is a superset of JSON: the config needs no YAML library.
  writeFileSync(join(dir, 'prometheus.yml'), JSON.stringify(config), { mode: 0o600 })
  const port = await freePort()
  const child = spawn(
    join(binDir, 'prometheus'),
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let log = ''
  child.stderr.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)))
  const exited = new Promise<void>((r) => child.once('exit', () => r()))
  const url = `http://127.0.0.1:${port}`
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await exited
    rmSync(dir, { recursive: true, force: true })
  }
  const ready = async () => (await fetch(`${url}/-/ready`).catch(() => null))?.ok ?? false
  for (let i = 0; i < 200 && !(await ready()); i++) {
    if (child.exitCode !== null) {
      await stop()
      throw new Error(`prometheus exited with ${child.exitCode}: ${log}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  if (!(await ready())) {
    await stop()
    throw new Error(`prometheus was not ready within 20 s: ${log}`)
  }
  const query = async (expr: string): Promise<PromSample[]> => {
    const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`)
    const body = (await res.json()) as { status: string; error?: string; data?: { result: PromSample[] } }
    if (body.status !== 'success') throw new Error(`query ${expr} failed: ${body.error ?? res.status}`)
    return body.data?.result ?? []
  }
  return {
    url,
    binDir,
    query,
    async waitFor(expr, accept, timeoutMs = 30_000) {
      let last: PromSample[] = []
      for (const end = Date.now() + timeoutMs; Date.now() < end; await new Promise((r) => setTimeout(r, 250))) {
        last = await query(expr)
        if (accept(last)) return last
      }
      throw new Error(`${expr} did not answer as expected within ${timeoutMs} ms; last: ${JSON.stringify(last)}`)
    },
    stop,
  }
}
