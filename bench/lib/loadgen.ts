/**
 * Load generator, run as a child process (`fork`) so it never shares an event loop with
 * the server under test. A minimal HTTP/1.1 client on raw keep-alive sockets: each of
 * `connections` sockets sends one request, waits for the whole response, sends the next.
 * Raw sockets keep the client's own cost per request far below node:http's client, so on
 * a 2-core machine the server, not the generator, is what saturates.
 *
 * Protocol: the parent sends one {@link LoadConfig}; the child answers with
 * `{ type: 'measure-start' }`, `{ type: 'measure-end' }` (so the parent can sample its own
 * CPU over the same window) and finally `{ type: 'result', result }`, then exits.
 */
import { connect, type Socket } from 'node:net'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'

export interface LoadConfig {
  host: string
  port: number
  method: 'GET'
  path: string
  headers: Record<string, string>
  connections: number
  warmupMs: number
  durationMs: number
  /** Status every response must have; others count as errors. */
  expectStatus: number
  /** Expected body length in bytes (checked when given; mismatches count as errors). */
  expectBodyBytes?: number
}

export interface LoadResult {
  requests: number
  errors: number
  /** First few distinct error descriptions. */
  errorSamples: string[]
  durationMs: number
  rps: number
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number }
  /** CPU the generator itself used during the window, in cores (1 = one core busy). */
  generatorCpuCores: number
}

type Phase = 'warmup' | 'measure' | 'done'

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[i]!
}

const CRLF2 = Buffer.from('\r\n\r\n')

/** Incremental parser for back-to-back HTTP/1.1 responses (content-length or chunked). */
class ResponseParser {
  private buf: Buffer = Buffer.alloc(0)
  constructor(private readonly onResponse: (status: number, bodyBytes: number) => void) {}

  push(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk])
    for (;;) {
      const consumed = this.parseOne()
      if (consumed === 0) return
      this.buf = this.buf.subarray(consumed)
      if (this.buf.length === 0) return
    }
  }

  /** Bytes of one complete response at the start of the buffer, or 0 if incomplete. */
  private parseOne(): number {
    const buf = this.buf
    const headEnd = buf.indexOf(CRLF2)
    if (headEnd < 0) return 0
    const head = buf.toString('latin1', 0, headEnd)
    const status = Number(head.slice(9, 12))
    const lower = head.toLowerCase()
    const bodyStart = headEnd + 4
    const cl = /\r\ncontent-length:\s*(\d+)/.exec(lower)
    if (cl) {
      const len = Number(cl[1])
      if (buf.length < bodyStart + len) return 0
      this.onResponse(status, len)
      return bodyStart + len
    }
    if (/\r\ntransfer-encoding:[^\r]*chunked/.test(lower)) {
      let at = bodyStart
      let total = 0
      for (;;) {
        const lineEnd = buf.indexOf('\r\n', at)
        if (lineEnd < 0) return 0
        const size = parseInt(buf.toString('latin1', at, lineEnd), 16)
        if (size === 0) {
          // Last chunk: no trailers expected, just the final CRLF.
          if (buf.length < lineEnd + 4) return 0
          this.onResponse(status, total)
          return lineEnd + 4
        }
        if (buf.length < lineEnd + 2 + size + 2) return 0
        total += size
        at = lineEnd + 2 + size + 2
      }
    }
    // No body (e.g. 204/304).
    this.onResponse(status, 0)
    return bodyStart
  }
}

/** Run the load and resolve with the measured window's numbers. */
export async function generateLoad(
  cfg: LoadConfig,
  notify: (msg: { type: string }) => void = () => {},
): Promise<LoadResult> {
  const headerLines = Object.entries({ host: `${cfg.host}:${cfg.port}`, ...cfg.headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')
  const request = Buffer.from(`${cfg.method} ${cfg.path} HTTP/1.1\r\n${headerLines}\r\n`, 'latin1')

  let phase: Phase = 'warmup'
  let latencies = new Float64Array(1 << 16)
  let count = 0
  let errors = 0
  const errorSamples = new Set<string>()
  const record = (ms: number) => {
    if (count === latencies.length) {
      const grown = new Float64Array(latencies.length * 2)
      grown.set(latencies)
      latencies = grown
    }
    latencies[count++] = ms
  }
  const fail = (what: string) => {
    if (phase === 'measure') errors++
    if (errorSamples.size < 5) errorSamples.add(what)
  }

  const sockets: Socket[] = []
  let open = 0
  let allClosed: () => void = () => {}
  const closed = new Promise<void>((r) => (allClosed = r))

  const startConnection = () =>
    new Promise<void>((ready, reject) => {
      const socket = connect({ host: cfg.host, port: cfg.port, noDelay: true })
      sockets.push(socket)
      open++
      let sentAt = 0
      const send = () => {
        sentAt = performance.now()
        socket.write(request)
      }
      const parser = new ResponseParser((status, bodyBytes) => {
        const ms = performance.now() - sentAt
        if (status !== cfg.expectStatus) fail(`status ${status}`)
        else if (cfg.expectBodyBytes !== undefined && bodyBytes !== cfg.expectBodyBytes)
          fail(`body ${bodyBytes} bytes, expected ${cfg.expectBodyBytes}`)
        else if (phase === 'measure') record(ms)
        if (phase === 'done') socket.end()
        else send()
      })
      socket.on('connect', () => {
        ready()
        send()
      })
      socket.on('data', (chunk) => parser.push(chunk))
      socket.on('error', (err) => {
        fail(`socket: ${err.message}`)
        reject(err)
      })
      socket.on('close', () => {
        if (phase !== 'done') fail('connection closed by server')
        if (--open === 0) allClosed()
      })
    })

  await Promise.all(Array.from({ length: cfg.connections }, startConnection))
  await new Promise((r) => setTimeout(r, cfg.warmupMs))

  phase = 'measure'
  notify({ type: 'measure-start' })
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await new Promise((r) => setTimeout(r, cfg.durationMs))
  const t1 = performance.now()
  const cpu = process.cpuUsage(cpu0)
  phase = 'done'
  notify({ type: 'measure-end' })

  // Let in-flight requests finish (each socket ends after its next response); bounded.
  const force = setTimeout(() => {
    for (const s of sockets) s.destroy()
  }, 2_000)
  await closed
  clearTimeout(force)

  const durationMs = t1 - t0
  const sorted = latencies.subarray(0, count).sort()
  let sum = 0
  for (let i = 0; i < count; i++) sum += sorted[i]!
  return {
    requests: count,
    errors,
    errorSamples: [...errorSamples],
    durationMs,
    rps: (count / durationMs) * 1000,
    latencyMs: {
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      max: count ? sorted[count - 1]! : NaN,
      mean: count ? sum / count : NaN,
    },
    generatorCpuCores: (cpu.user + cpu.system) / 1000 / durationMs,
  }
}

// Child-process entry: one config in, one result out, exit.
if (process.send && process.argv[1] === fileURLToPath(import.meta.url)) {
  const send = process.send.bind(process)
  process.once('message', (cfg: LoadConfig) => {
    generateLoad(cfg, (m) => send(m))
      .then((result) => send({ type: 'result', result }, () => process.exit(0)))
      .catch((err: unknown) =>
        send({ type: 'error', error: String((err as Error)?.stack ?? err) }, () => process.exit(1)),
      )
  })
}
