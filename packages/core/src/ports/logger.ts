/** Structured log sink. Berth never passes secret values, keys or tokens to it. */
export interface Logger {
  info(msg: string, fields?: Record<string, unknown>): void
  warn(msg: string, fields?: Record<string, unknown>): void
  error(msg: string, fields?: Record<string, unknown>): void
}

/**
 * JSON-lines logger writing to a stream-like sink (stderr by default).
 *
 * @example
 * ```ts
 * const log = jsonLogger(); log.info('listening', { port: 3000 })
 * ```
 */
export function jsonLogger(write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  const emit = (level: string, msg: string, fields?: Record<string, unknown>) =>
    write(`${JSON.stringify({ level, time: new Date().toISOString(), msg, ...fields })}\n`)
  return {
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
  }
}

/** A logger that drops everything. */
export const silentLogger: Logger = { info() {}, warn() {}, error() {} }
