/**
 * The one copy of an upstream's answer that every proxy Berth runs makes (previews, the egress
 * proxy and its intercepted tunnels, the model gateway): the status checked, the reason phrase
 * Node's standard one, headers filtered and checked, the body streamed with every failure
 * handled. Whatever bytes an upstream sends, the client gets a well-formed answer or the proxy's
 * own 502; nothing here throws.
 */
import {
  type IncomingMessage,
  type ServerResponse,
  STATUS_CODES,
  validateHeaderName,
  validateHeaderValue,
} from 'node:http'
import { type Duplex, pipeline, type Readable, Transform, type Writable } from 'node:stream'

/** Connection-level headers (RFC 9110 7.6.1) and a proxy's own credentials: never passed on. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
])

/**
 * The status of an upstream's final answer as passed on, or null when the proxy must answer 502
 * instead: an integer from 200 to 599. A 1xx is an interim answer (Node's client consumes them;
 * a 101 ends in an upgrade, see {@link rawHead}), and `099` or `600` are no HTTP status at all.
 */
export function finalStatus(status: number | undefined): number | null {
  return status !== undefined && Number.isInteger(status) && status >= 200 && status <= 599 ? status : null
}

/** What a proxy drops or rewrites in an upstream answer's headers, beside the hop-by-hop ones. */
export interface AnswerRules {
  /** More names (lower case) never passed on. */
  drop?: ReadonlySet<string>
  /** An upgrade's `101` keeps its `Connection` and `Upgrade` headers. */
  upgrade?: boolean
  /** Each value as passed on (a secret an upstream echoes shown as its placeholder again). */
  value?: (value: string) => string
}

/**
 * The headers of an upstream's answer to pass on, as Node's flat `[name, value, …]` list
 * (duplicates, order and case kept): hop-by-hop ones and those its `Connection` header names
 * dropped, then any name or value node:http would refuse to write (a parser run with
 * `--insecure-http-parser`, or fetch's, lets some through).
 */
export function answerHeaders(raw: readonly string[], rules: AnswerRules = {}): string[] {
  const named = new Set<string>()
  for (let i = 0; i + 1 < raw.length; i += 2)
    if (raw[i]!.toLowerCase() === 'connection')
      for (const token of raw[i + 1]!.split(',')) named.add(token.trim().toLowerCase())
  const out: string[] = []
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!
    const lower = name.toLowerCase()
    const kept = rules.upgrade === true && (lower === 'connection' || lower === 'upgrade')
    if (!kept && (HOP_BY_HOP.has(lower) || named.has(lower) || rules.drop?.has(lower))) continue
    const value = rules.value ? rules.value(raw[i + 1]!) : raw[i + 1]!
    if (writable(name, value)) out.push(name, value)
  }
  return out
}

function writable(name: string, value: string): boolean {
  try {
    validateHeaderName(name)
    validateHeaderValue(name, value)
    return true
  } catch {
    return false
  }
}

/**
 * Write the head of an upstream's answer on `res`: its status when {@link finalStatus} passes
 * it, Node's standard reason phrase (never the upstream's), `headers` from {@link answerHeaders}.
 * False, writing nothing, when the status does not pass or a head was already written.
 */
export function writeAnswerHead(res: ServerResponse, status: number | undefined, headers: string[]): boolean {
  const code = finalStatus(status)
  if (code === null || res.headersSent) return false
  res.writeHead(code, headers)
  return true
}

/**
 * Stream a body from one side to the other: either side failing (an upstream reset mid-body, a
 * truncated chunked body, a client gone) destroys both, so the client sees a cut answer rather
 * than one that never ends, and no stream is left without an `error` listener.
 */
export function pipeBody(from: Readable, to: Writable): void {
  pipeline(from, to, () => {})
}

/**
 * Copy an upstream's answer to `res`: head by {@link writeAnswerHead}, body by {@link pipeBody}.
 * False when the status does not pass: the upstream's answer is discarded and the caller answers
 * 502 its own way.
 */
export function copyAnswer(up: IncomingMessage, res: ServerResponse, headers: string[]): boolean {
  if (!writeAnswerHead(res, up.statusCode, headers)) {
    up.destroy()
    return false
  }
  pipeBody(up, res)
  return true
}

/**
 * Copy an upstream's answer to a raw socket (an upgrade the upstream refused, where Node gives
 * the proxy a socket rather than a response object), then close it: the head as
 * {@link copyAnswer} writes it, the body framed again so that a body the upstream cut short
 * reaches the client cut short too (its `Content-Length` kept, else chunked). False when the
 * status does not pass: the upstream's answer is discarded and the caller answers 502.
 */
export function copyRawAnswer(up: IncomingMessage, socket: Duplex, headers: string[]): boolean {
  const status = finalStatus(up.statusCode)
  if (status === null) {
    up.destroy()
    return false
  }
  const bodiless = status === 204 || status === 304
  const sized = headers.some((h, i) => i % 2 === 0 && h.toLowerCase() === 'content-length')
  const chunked = !bodiless && !sized
  socket.write(
    rawHead(status, [...headers, ...(chunked ? ['transfer-encoding', 'chunked'] : []), 'connection', 'close']),
  )
  if (bodiless) {
    up.destroy()
    socket.end()
  } else if (chunked) pipeline(up, chunks(), socket, () => {})
  else pipeBody(up, socket)
  return true
}

/** HTTP/1.1 chunked framing: each piece as a chunk, and the last chunk at the end. */
function chunks(): Transform {
  return new Transform({
    transform(piece: Buffer, _encoding, done) {
      if (piece.length === 0) return done()
      done(null, Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]))
    },
    flush: (done) => done(null, '0\r\n\r\n'),
  })
}

/**
 * An answer's head for a raw socket (upgrades, CONNECT, where Node gives the proxy a socket
 * rather than a response object), with Node's standard reason phrase. `status` is the proxy's
 * own or one {@link finalStatus} passed; `headers` are the proxy's own or from {@link answerHeaders}.
 */
export function rawHead(status: number, headers: readonly string[]): string {
  let text = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'unknown'}\r\n`
  for (let i = 0; i + 1 < headers.length; i += 2) text += `${headers[i]}: ${headers[i + 1]}\r\n`
  return `${text}\r\n`
}
