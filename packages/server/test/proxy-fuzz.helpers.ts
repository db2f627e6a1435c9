/**
 * Malformed HTTP answers from a seed, a raw upstream on loopback that sends them byte for byte
 * (slowly, cut, reset), and what a proxy must make of each: a sane copy, its own 502, or a
 * head passed on and then the connection cut. Used by proxy-fuzz.test.ts on every proxy.
 */
import { request as httpRequest, type IncomingMessage, type RequestOptions, STATUS_CODES } from 'node:http'
import { createServer as netServer, type Server, type Socket } from 'node:net'
import { createServer as tlsServer, TLSSocket } from 'node:tls'
import type { Duplex } from 'node:stream'

/** A small seeded generator (mulberry32): the same cases on every run. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** What a proxy must make of one answer. */
export type Expect =
  | { kind: 'copy'; status: number; body: string }
  | { kind: 'bad-gateway' }
  /** The head passed on, then the connection cut; after a reset, possibly a 502 (the head was lost with it). */
  | { kind: 'cut'; status: number; or502: boolean }
  | { kind: 'switch' }

/** One upstream answer: its bytes in pieces written `waitMs` apart, how the connection ends, what must come of it. */
export interface FuzzCase {
  id: number
  label: string
  pieces: Buffer[]
  waitMs: number
  ending: 'end' | 'reset' | 'echo'
  expect: Expect
}

// Status lines: a status Node's parser reads and the proxy passes on (whatever its reason phrase), or null.
const STATUS_LINES: [string, number | null][] = [
  ['HTTP/1.1 200 OK', 200],
  ['HTTP/1.1 404 Not Found', 404],
  ['HTTP/1.1 503 Service Unavailable', 503],
  ['HTTP/1.1 299 Odd', 299],
  ['HTTP/1.1 200', 200],
  ['HTTP/1.1 200 OK\x01', 200],
  ['HTTP/1.1 200 O\x00K', 200],
  ['HTTP/1.1 201 \xe9\xff', 201],
  ['HTTP/1.1 200 O\tK', 200],
  ['HTTP/1.1 500 \x1b[31mred', 500],
  ['HTTP/1.1 099 Low', null],
  ['HTTP/1.1 000 Zero', null],
  ['HTTP/1.1 600 High', null],
  ['HTTP/1.1 999 Max', null],
  ['HTTP/1.1 abc Letters', null],
  ['HTTP/1.1 20 Short', null],
  ['HTTP/1.1 2000 Long', null],
  ['HTTP/2 200 OK', null],
  ['ICY 200 OK', null],
  ['HTTP/1.1 100 Continue', null],
  ['HTTP/1.1 101 Switching Protocols', null],
  ['', null],
]

// Extra headers: true when Node's parser reads them (the proxy then passes or drops them), false when it refuses the answer.
const HEADERS: [string, boolean][] = [
  ['x-high: caf\xe9', true],
  ['x-tab: a\tb', true],
  ['set-cookie: a=1', true],
  ['keep-alive: timeout=5', true],
  ['trailer: x-later', true],
  ['X-Mixed-Case: Yes', true],
  ['x-ctl: a\x01b', false],
  ['x-nul: a\x00b', false],
  ['x-del: a\x7fb', false],
  ['x(bad: 1', false],
  [' x-lead: 1', false],
  [': empty', false],
  ['nocolon', false],
  [`x-long: ${'a'.repeat(20_000)}`, false],
  ['content-length: -1', false],
  ['content-length: abc', false],
  ['x-obs: a\r\n folded', false],
]

type Framing = 'length' | 'chunked' | 'close' | 'short-length' | 'bad-chunk' | 'short-chunk'
const FRAMINGS: Framing[] = ['length', 'chunked', 'close', 'short-length', 'bad-chunk', 'short-chunk']

/** Headers every answer with a head carries: the proxy must drop the hop-by-hop ones and the one `Connection` names. */
const BASE = (id: number) => [
  'connection: close, x-secret',
  'x-secret: 1',
  'proxy-authenticate: Basic realm=x',
  `x-case: ${id}`,
]

function framed(framing: Framing, body: string): { headers: string[]; body: string; cut: boolean } {
  switch (framing) {
    case 'length':
      return { headers: [`content-length: ${body.length}`], body, cut: false }
    case 'chunked':
      return {
        headers: ['transfer-encoding: chunked'],
        body: `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
        cut: false,
      }
    case 'close':
      return { headers: [], body, cut: false }
    case 'short-length':
      return { headers: [`content-length: ${body.length + 7}`], body, cut: true }
    case 'bad-chunk':
      return {
        headers: ['transfer-encoding: chunked'],
        body: `${body.length.toString(16)}\r\n${body}\r\nzz\r\n`,
        cut: true,
      }
    case 'short-chunk':
      return {
        headers: ['transfer-encoding: chunked'],
        body: `${(body.length + 5).toString(16)}\r\n${body}`,
        cut: true,
      }
  }
}

function split(bytes: Buffer, parts: number, rnd: () => number): Buffer[] {
  const cuts = Array.from({ length: parts - 1 }, () => 1 + Math.floor(rnd() * (bytes.length - 1))).sort((a, b) => a - b)
  const out: Buffer[] = []
  let at = 0
  for (const cut of [...cuts, bytes.length]) {
    if (cut > at) out.push(bytes.subarray(at, cut))
    at = Math.max(at, cut)
  }
  return out
}

/**
 * `count` answers from `seed`: a status line (valid, odd reason phrase, or no HTTP status), up
 * to two extra headers (passed, dropped or refused by Node's parser), a framing (whole, cut
 * short, bad chunks), written in up to four pieces up to 25 ms apart; one in eight is cut
 * mid-head; answers cut anyway end with a FIN or a reset. With `upgrade`, one in five is a `101` that switches to an echo.
 */
export function fuzzCases(seed: number, count: number, upgrade = false): FuzzCase[] {
  const rnd = seeded(seed)
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)]!
  const cases: FuzzCase[] = []
  for (let id = 0; id < count; id++) {
    const extra = Array.from({ length: Math.floor(rnd() * 3) }, () => pick(HEADERS))
    const headersOk = extra.every(([, ok]) => ok)
    const extraLines = extra.map(([line]) => line)
    const waitMs = Math.floor(rnd() * 26)
    const parts = 1 + Math.floor(rnd() * 4)
    if (upgrade && rnd() < 0.2) {
      const head = ['HTTP/1.1 101 Switching Protocols', 'connection: upgrade', 'upgrade: echo', ...extraLines]
      const bytes = Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1')
      const expect: Expect = headersOk ? { kind: 'switch' } : { kind: 'bad-gateway' }
      cases.push({
        id,
        label: `101 ${JSON.stringify(extraLines)}`,
        pieces: split(bytes, parts, rnd),
        waitMs,
        ending: 'echo',
        expect,
      })
      continue
    }
    const [statusLine, status] = pick(upgrade ? STATUS_LINES.filter(([, code]) => code !== 101) : STATUS_LINES)
    const framing = pick(FRAMINGS)
    const f = framed(framing, `body-${id}`)
    const head = [
      ...(statusLine ? [statusLine] : []),
      ...BASE(id),
      'content-type: text/plain',
      ...extraLines,
      ...f.headers,
    ]
    const headText = `${head.join('\r\n')}\r\n\r\n`
    const cutHead = rnd() < 0.125
    // A reset may discard what the proxy had not read yet: only answers that are cut anyway end with one.
    const ending = (f.cut || cutHead) && rnd() < 0.5 ? 'reset' : 'end'
    let bytes = Buffer.from(headText + f.body, 'latin1')
    let expect: Expect
    if (cutHead) {
      bytes = bytes.subarray(0, 1 + Math.floor(rnd() * (headText.length - 2)))
      expect = { kind: 'bad-gateway' }
    } else if (status === null || !headersOk) expect = { kind: 'bad-gateway' }
    else if (f.cut) expect = { kind: 'cut', status, or502: ending === 'reset' }
    else expect = { kind: 'copy', status, body: `body-${id}` }
    const label = `${JSON.stringify(statusLine)} ${JSON.stringify(extraLines).slice(0, 80)} ${framing}${cutHead ? ' cut-head' : ''} ${ending}`
    cases.push({ id, label, pieces: split(bytes, parts, rnd), waitMs, ending, expect })
  }
  return cases
}

/** A raw upstream on 127.0.0.1 (TLS when `tls` is given): `GET …/c/<id>` gets case `id`'s bytes, nothing else. */
export async function rawUpstream(
  cases: FuzzCase[],
  tls?: { key: string; cert: string },
): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Duplex>()
  const onSocket = (s: Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
    s.on('error', () => {})
    let head = ''
    const onData = (d: Buffer) => {
      head += d.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      s.off('data', onData)
      const id = /\/c\/(\d+)/.exec(head.split('\r\n')[0] ?? '')?.[1]
      const c = id === undefined ? undefined : cases[Number(id)]
      if (!c) return void s.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n')
      void play(s, c)
    }
    s.on('data', onData)
  }
  const server: Server = tls ? tlsServer(tls, onSocket) : netServer(onSocket)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

async function play(s: Socket, c: FuzzCase): Promise<void> {
  for (const [i, piece] of c.pieces.entries()) {
    // The slow upstream of a case, not a wait for the test's sake.
    if (i > 0 && c.waitMs) await new Promise((resolve) => setTimeout(resolve, c.waitMs))
    if (s.destroyed) return
    s.write(piece)
  }
  if (c.ending === 'echo') s.pipe(s)
  else if (c.ending === 'end') s.end()
  // A TLS socket has no TCP reset of its own: it is dropped without close_notify.
  else if (s instanceof TLSSocket) s.destroy()
  else s.resetAndDestroy()
}

/** What the client saw: an answer (whole or cut), a switch to the echo, or no answer at all. */
export type Outcome =
  | { kind: 'response'; status: number; reason: string; headers: string[]; body: string; complete: boolean }
  | { kind: 'switch'; echoed: string }
  | { kind: 'error'; code: string }

/**
 * One request through a proxy with Node's own (strict) client, which refuses any answer that
 * is not valid HTTP; with `upgrade`, it asks to switch to `echo` and sends `ping` once switched;
 * `body` is sent as the request's body.
 */
export function exchange(options: RequestOptions, upgrade = false, body?: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const headers = {
      ...(options.headers as Record<string, string>),
      ...(upgrade && { connection: 'Upgrade', upgrade: 'echo' }),
    }
    // A connection of its own per request (agent: false would ignore a given createConnection).
    const req = httpRequest({ ...(!options.createConnection && { agent: false }), ...options, headers })
    let settled = false
    const done = (o: Outcome) => {
      if (!settled) resolve(o)
      settled = true
    }
    req.on('error', (err: NodeJS.ErrnoException) => done({ kind: 'error', code: err.code ?? err.message }))
    // A proxy that never finishes its answer (no slow case pauses for more than 25 ms) fails the case.
    req.setTimeout(10_000, () => {
      done({ kind: 'error', code: 'no answer within 10 s' })
      req.destroy()
    })
    req.on('upgrade', (_res, socket) => {
      let echoed = ''
      socket.on('error', () => {})
      socket.on('data', (d: Buffer) => {
        echoed += d.toString()
        if (echoed.length >= 4) {
          socket.destroy()
          done({ kind: 'switch', echoed })
        }
      })
      socket.on('close', () => done({ kind: 'switch', echoed }))
      socket.write('ping')
    })
    req.on('response', (res: IncomingMessage) => {
      let body = ''
      const answer = (complete: boolean) =>
        done({
          kind: 'response',
          status: res.statusCode ?? 0,
          reason: res.statusMessage ?? '',
          headers: res.rawHeaders,
          body,
          complete,
        })
      res.setEncoding('latin1')
      res.on('data', (d: string) => (body += d))
      res.on('error', () => {})
      res.on('end', () => answer(true))
      res.on('close', () => answer(res.complete))
    })
    req.end(body)
  })
}

/** Every way `o` may fail case `c`, as readable lines (none when the proxy did right). */
export function judge(c: FuzzCase, o: Outcome): string[] {
  const wrong: string[] = []
  const at = `case ${c.id} (${c.label}):`
  if (o.kind === 'error') return [`${at} no answer from the proxy (${o.code})`]
  if (o.kind === 'switch') {
    if (c.expect.kind !== 'switch') wrong.push(`${at} switched protocols, expected ${c.expect.kind}`)
    else if (o.echoed !== 'ping') wrong.push(`${at} echoed ${JSON.stringify(o.echoed)}`)
    return wrong
  }
  if (o.status < 200 || o.status > 599) wrong.push(`${at} status ${o.status}`)
  if (o.reason !== (STATUS_CODES[o.status] ?? 'unknown')) wrong.push(`${at} reason phrase ${JSON.stringify(o.reason)}`)
  const names = o.headers.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase())
  for (const hop of ['x-secret', 'proxy-authenticate', 'trailer'])
    if (names.includes(hop)) wrong.push(`${at} passed on ${hop}`)
  const e = c.expect
  if (e.kind === 'switch') wrong.push(`${at} answered ${o.status}, expected a switch`)
  if (e.kind === 'bad-gateway' && (o.status !== 502 || !o.complete))
    wrong.push(`${at} ${o.status}, expected a whole 502`)
  const refused = e.kind === 'cut' && e.or502 && o.status === 502 && o.complete
  if (e.kind === 'cut' && !refused && (o.status !== e.status || o.complete))
    wrong.push(`${at} ${o.status} ${o.complete ? 'whole' : 'cut'}, expected ${e.status} cut`)
  if (e.kind === 'copy' && (o.status !== e.status || o.body !== e.body || !o.complete))
    wrong.push(
      `${at} ${o.status} ${JSON.stringify(o.body)} ${o.complete ? 'whole' : 'cut'}, expected ${e.status} ${e.body}`,
    )
  return wrong
}
