/** A small HTTP + WebSocket server an agent starts in its container, and raw ways to reach a preview. */
import { request as httpRequest } from 'node:http'
import { connect, createServer, type Server, type Socket } from 'node:net'
import WebSocket from 'ws'

/**
 * Node source of a server on `port`: `hello <method> <url> auth=<authorization>` for HTTP
 * (the request body appended), and an echo of one short text frame per WebSocket message.
 */
const SERVER_SOURCE = (port: number) => `
const http = require('http'), crypto = require('crypto');
const s = http.createServer((q, r) => {
  let body = '';
  q.on('data', (c) => (body += c));
  q.on('end', () => r.end('hello ' + q.method + ' ' + q.url + ' auth=' + (q.headers.authorization || '') + ' body=' + body));
});
s.on('upgrade', (q, k) => {
  const a = crypto.createHash('sha1').update(q.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  k.write('HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: ' + a + '\\r\\n\\r\\n');
  k.on('data', (b) => {
    const n = b[1] & 127, m = b.subarray(2, 6), p = Buffer.from(b.subarray(6, 6 + n).map((x, i) => x ^ m[i % 4]));
    if ((b[0] & 15) === 1) k.write(Buffer.concat([Buffer.from([0x81, p.length + 5]), Buffer.from('echo:'), p]));
  });
});
s.listen(${port});
`

/**
 * A prompt whose agent starts the server with Claude Code's own `run_in_background` Bash (a
 * session's living agent keeps it running after the task), then waits until it answers;
 * with `holdS`, that call then stays that long (the task runs on meanwhile).
 */
export function serveInContainer(port = 8000, holdS = 0): string {
  return daemonInContainer(SERVER_SOURCE(port), port, holdS)
}

/**
 * Node source of a server on `port` that answers every request with raw bytes no HTTP server
 * would write: `HTTP/1.1 200 OK\x01` (a reason phrase with a control character), or status
 * `099` for `GET /status` (audit FINDINGS 15).
 */
export const HOSTILE_SOURCE = (port: number) => `
require('net').createServer((s) => {
  s.on('error', () => {});
  s.once('data', (d) => s.end(String(d).startsWith('GET /status ')
    ? 'HTTP/1.1 099 Low\\r\\ncontent-length: 2\\r\\n\\r\\nhi'
    : 'HTTP/1.1 200 OK\\x01\\r\\ncontent-length: 2\\r\\n\\r\\nhi'));
}).listen(${port});
`

/** A prompt whose agent starts `source` (listening on `port`) in the background, as {@link serveInContainer} does. */
export function daemonInContainer(source: string, port: number, holdS = 0): string {
  const b64 = Buffer.from(source).toString('base64')
  // As a dev server an agent starts: Claude Code's background shell, kept by the session's living agent.
  const serve = `node -e "eval(Buffer.from('${b64}', 'base64').toString())"`
  const wait = `for i in $(seq 50); do if node -e "require('http').get('http://127.0.0.1:${port}/',()=>process.exit(0)).on('error',()=>process.exit(1))"; then echo started; break; fi; sleep 0.2; done${holdS ? `; sleep ${holdS}` : ''}`
  return `Serve it. [[berth:tool Bash ${JSON.stringify({ command: serve, run_in_background: true })}]] [[berth:tool Bash ${JSON.stringify({ command: wait })}]]`
}

/** A GET (or `method`) with the raw request target `path`, exactly as written; status and body. */
export function rawRequest(
  base: string,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: string }> {
  const url = new URL(base)
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, method: init.method ?? 'GET', path, headers: init.headers },
      (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => (body += c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      },
    )
    req.on('error', reject)
    req.end(init.body)
  })
}

/** Raw bytes written to the server's port, and whatever comes back until it closes (or 3 s of quiet). */
export function rawExchange(base: string, bytes: string): Promise<string> {
  const url = new URL(base)
  return new Promise((resolve) => {
    let got = ''
    const s = connect({ host: url.hostname, port: Number(url.port) }, () => s.write(bytes))
    const done = () => {
      s.destroy()
      resolve(got)
    }
    s.setTimeout(3_000, done)
    s.on('data', (c) => (got += c.toString('utf8')))
    s.on('close', done)
    s.on('error', done)
  })
}

/** One message sent over a WebSocket to `url`, and the first answer. */
export function echoOverWebSocket(url: string, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url)
    ws.on('open', () => ws.send(text))
    ws.on('message', (data) => {
      resolve(String(data))
      ws.close()
    })
    ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)))
    ws.on('error', reject)
  })
}

/** A listener on this host that counts every connection it gets (none may come). */
export async function tripwire(): Promise<{ port: number; hits: () => number; close(): Promise<void> }> {
  let hits = 0
  const sockets = new Set<Socket>()
  const server: Server = createServer((s) => {
    hits++
    sockets.add(s)
    s.on('error', () => {})
    s.end('HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\ntripwire')
  })
  await new Promise<void>((r) => server.listen(0, '0.0.0.0', r))
  return {
    port: (server.address() as { port: number }).port,
    hits: () => hits,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise((r) => server.close(r))
    },
  }
}
