/**
 * Third parties for notification tests, speaking the real protocols on 127.0.0.1: a webhook
 * receiver (node:http) that checks signatures the way a receiver would, and an SMTP server
 * (smtp-server) that parses what it receives (mailparser).
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { simpleParser, type ParsedMail } from 'mailparser'
import { SMTPServer } from 'smtp-server'

export interface Received {
  headers: IncomingHttpHeaders
  body: string
  /** `performance.now()` when it arrived. */
  at: number
}

/** What the receiver does with a request: a status, or `'hang'` (never answers). */
export type Respond = (req: Received, index: number) => number | 'hang'

/**
 * A webhook receiver. `respond` decides each answer (default 200); every request is kept.
 *
 * @example
 * ```ts
 * const r = await startReceiver((_, i) => (i < 2 ? 500 : 200))
 * ```
 */
export async function startReceiver(respond: Respond = () => 200) {
  const received: Received[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8')
    req.on('data', (c: string) => (body += c))
    req.on('end', () => {
      const r: Received = { headers: req.headers, body, at: performance.now() }
      received.push(r)
      const answer = respond(r, received.length - 1)
      if (answer === 'hang') return
      res.writeHead(answer, answer >= 300 && answer < 400 ? { location: 'http://127.0.0.1:1/elsewhere' } : {}).end('ok')
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  }
}

/**
 * Check `X-Berth-Signature` the way a receiver does: HMAC-SHA256 over `"<timestamp>.<body>"`
 * with the shared secret, compared in constant time.
 *
 * @example
 * ```ts
 * expect(verifySignature('s3cret', received[0])).toBe(true)
 * ```
 */
export function verifySignature(secret: string, r: Received): boolean {
  const header = String(r.headers['x-berth-signature'] ?? '')
  const timestamp = String(r.headers['x-berth-timestamp'] ?? '')
  const expected = `sha256=${createHmac('sha256', secret).update(`${timestamp}.${r.body}`).digest('hex')}`
  return header.length === expected.length && timingSafeEqual(Buffer.from(header), Buffer.from(expected))
}

/**
 * An SMTP server requiring `user`/`pass`, without STARTTLS (a local relay); every accepted
 * mail is parsed. `reject` refuses recipients with that SMTP code.
 *
 * @example
 * ```ts
 * const smtp = await startSmtp()
 * createBerth({ smtp: { host: '127.0.0.1', port: smtp.port, from: 'berth@example.test', auth: smtp.auth, ignoreTLS: true } })
 * ```
 */
export async function startSmtp(opts: { reject?: number } = {}) {
  const auth = { user: 'berth', pass: 'smtp-pass-4242' }
  const mails: ParsedMail[] = []
  const logins: string[] = []
  const server = new SMTPServer({
    secure: false,
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authMethods: ['PLAIN', 'LOGIN'],
    logger: false,
    onAuth(a, _session, cb) {
      logins.push(String(a.username))
      if (a.username === auth.user && a.password === auth.pass) cb(null, { user: a.username })
      else cb(new Error('Invalid username or password'))
    },
    onRcptTo(address, _session, cb) {
      if (opts.reject)
        cb(Object.assign(new Error(`Mailbox ${address.address} unavailable`), { responseCode: opts.reject }))
      else cb()
    },
    onData(stream, _session, cb) {
      simpleParser(stream).then(
        (mail) => {
          mails.push(mail)
          cb()
        },
        (err: Error) => cb(err),
      )
    },
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.server.address() as AddressInfo).port
  return { port, auth, mails, logins, close: () => new Promise<void>((r) => server.close(() => r())) }
}
