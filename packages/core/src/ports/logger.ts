/** Structured log sink. Berth never passes secret values, keys or tokens to it. */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  error(msg: string, fields?: Record<string, unknown>): void
}

/** Lines gathered before one write, at most (the rest of a turn goes in the next write). */
const BATCH_LINES = 256
let stderrLines: ((line: string) => void) | undefined

/**
 * One writer for every default logger: the lines of one turn of the event loop go to stderr
 * in one write. stderr on a file or a pipe is synchronous in Node, so a write per request
 * line was a system call per request. Lines still pending when the process exits (even on
 * `process.exit()` or an uncaught error) are written then.
 */
function batchedStderr(): (line: string) => void {
  if (stderrLines) return stderrLines
  let pending: string[] = []
  const flush = () => {
    if (pending.length === 0) return
    const out = pending.join('')
    pending = []
    process.stderr.write(out)
  }
  process.on('exit', flush)
  stderrLines = (line) => {
    if (pending.length === 0) setImmediate(flush)
    pending.push(line)
    if (pending.length >= BATCH_LINES) flush()
  }
  return stderrLines
}

/**
 * JSON-lines logger writing to a stream-like sink (stderr by default, written once per turn
 * of the event loop).
 *
 * @example
 * ```ts
 * const log = jsonLogger(); log.info('listening', { port: 3000 })
 * ```
 */
export function jsonLogger(write: (line: string) => void = batchedStderr()): Logger {
  // The timestamp string changes once a millisecond; requests in the same one share it.
  let lastMs = 0
  let lastIso = ''
  const emit = (level: string, msg: string, fields?: Record<string, unknown>) => {
    const now = Date.now()
    if (now !== lastMs) {
      lastMs = now
      lastIso = new Date(now).toISOString()
    }
    // The same line as JSON.stringify({ level, time, msg, ...fields }) without copying `fields`.
    const rest = fields ? JSON.stringify(fields) : '{}'
    const head = `{"level":"${level}","time":"${lastIso}","msg":${JSON.stringify(msg)}`
    write(`${head}${rest.length > 2 ? `,${rest.slice(1)}` : '}'}\n`)
  }
  return {
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
  }
}

/** A logger that drops everything. */
export const silentLogger: Logger = { info() {}, warn() {}, error() {} }
